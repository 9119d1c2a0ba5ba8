// Package testbin gives process-level tests the node binary: the one
// $TALLY_NODE_BIN names (scripts/test.sh builds it once, with the race
// detector, for every package's tests and the JavaScript client's), or
// one built here once per test binary. It imports nothing of Tally's.
package testbin
