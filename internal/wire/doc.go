// Package wire reads and appends the varint-and-bytes encodings Tally's
// binary formats are built from: the ledger's records (canonical: one byte
// string per record, so its hash is the record's), the counters and
// ballots on the gossip wire, and the vote-state checkpoint.
//
// A Reader keeps the first error and returns zero values after it, so a
// decoder reads a whole structure and checks once at the end. Its errors
// wrap the sentinel the caller gives (ledger.ErrMalformed,
// gossip.ErrMalformed, …), so each format keeps its own error identity.
// It imports nothing of Tally's.
package wire
