// Package state is a node's replicated state: the poll definitions (as
// last-writer-wins registers) and, per poll, the tally of every replica.
//
// This replica's own counts are written on the vote path by many goroutines
// at once, so they live in striped cells: each option has a row of padded
// atomic counters, a writer picks a stripe at random, and readers sum the
// stripes. Reading a tally folds the cells into the poll's crdt.Tally, which
// also holds what other replicas reported (merged by gossip). Everything is
// safe for concurrent use: ingest writes, gossip merges, fan-out reads.
//
// A checkpoint (checkpoint.go) saves the vote state at one instant — per
// poll its counts, record count and every replica's ballots — so a restart
// replays only the ledger's tail: Snapshot copies it, Checkpoint.Write
// writes it, LoadCheckpoint checks a saved one whole before restoring it.
//
// It imports crdt, hlc, ids, internal/wire, ledger (the certificate type)
// and poll of this module.
package state
