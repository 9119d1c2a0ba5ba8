// Package flagerr says the standard flag package's errors in one line, in
// the terms of the person who typed the command: which flag, the value
// given, and what it expects instead of "parse error". tally-node and
// tally both use it. It imports nothing of Tally's.
package flagerr
