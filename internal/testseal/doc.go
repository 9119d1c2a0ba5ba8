// Package testseal is the tests' stand-in for the cluster keyring's seal
// (Sealer): an HMAC-SHA-256 tag before the message, as the node's keyring
// puts one. It imports nothing of Tally's.
package testseal
