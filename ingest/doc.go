// Package ingest is the vote pipeline and the write side of the HTTP API.
//
// A vote goes through, in order: shape and size checks; idempotency (the
// poll's ballots, which hold a keyed hash of every key taken at any
// region, then the ledger's index for this node's own); rate limits per client IP and per voter (token buckets); a hybrid
// logical timestamp; the poll's window (not open, open, grace, closed);
// ledger.Append, synced before the acknowledgement; and only then this
// replica's counters in package state, moved by last-vote-wins per voter.
// Nothing is counted that is not durable, and a request refused for any
// reason changes nothing.
//
// Every vote goes through one unexported method, submit (pipeline.go): the
// HTTP handler (HandleVotes) reaches it, and so does the live socket
// through Pipeline.Vote, which node hands to fanout as its Voter. Replay
// rebuilds the voter state and counters from the ledger at start-up, and
// WriteCheckpoint / LoadCheckpoint save and load them between restarts.
// The package also serves voter sessions (the puzzle and the token). The
// definitions' lifecycle (creating, closing, extending and revealing polls,
// running a quiz) is package admin's.
//
// Pipeline is safe for concurrent use. It starts no goroutines.
package ingest
