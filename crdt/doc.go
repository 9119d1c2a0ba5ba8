// Package crdt holds the replicated data types Tally's state is made of:
// grow-only and positive-negative counters keyed by replica id, the per-poll
// Tally (option → PN-counter, plus each replica's ledger record count),
// last-writer-wins registers and maps ordered by hybrid logical time, and
// Ballots: every replica's ballots of one poll, which decide per voter the
// counted vote (the latest, or for a quiz the first) and move the
// counters when it changes, so the live tally equals what certification
// computes from the ledgers.
//
// Every Merge is commutative, associative and idempotent, so replicas may
// exchange state in any order, more than once, late, and still converge. A
// replica only ever increments its own entries; merging takes the maximum of
// each entry. A Tally also remembers which entries changed since a version,
// so gossip can ship a delta instead of the whole state; applying a delta is
// an ordinary Merge.
//
// The types are pure values with no I/O and no locking: callers that share
// one across goroutines guard it themselves (package state does). The
// package imports nothing of this module but hlc and internal/wire (its
// binary encoding).
package crdt
