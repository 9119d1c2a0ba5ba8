// Package client is the Go client of a Tally node's HTTP API: typed calls
// for the public endpoints (polls, votes, voter sessions, results, quizzes
// and their leaderboards), the host's admin endpoints (create, close,
// extend, reveal, certify, run a quiz, export a ledger, take a backup) and
// the live stream (Watch: snapshot, diffs, resync on a seq gap, the final
// certified frame, reconnection with jittered back-off).
//
// It speaks the JSON of package api, the same types the node answers
// with, and imports no server package. An error the node answers with is
// an *Error carrying its status and machine-readable code (docs/api.md,
// "Errors"); errors.Is(err, ErrNotFound) and the like test for the common
// ones.
//
// A Client is safe for concurrent use. Watch runs on the caller's
// goroutine until its context ends or the poll is certified.
package client
