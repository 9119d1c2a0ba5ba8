// Package ingest is the vote pipeline and the write side of the HTTP API.
//
// A vote goes through, in order: shape and size checks; idempotency (the
// in-memory set of keys this node has acknowledged, then the ledger's
// index); rate limits per client IP and per voter (token buckets); a hybrid
// logical timestamp; the poll's window (not open, open, grace, closed);
// ledger.Append, synced before the acknowledgement; and only then this
// replica's counters in package state, moved by last-vote-wins per voter.
// Nothing is counted that is not durable, and a request refused for any
// reason changes nothing.
//
// Pipeline.Submit is the one entry point, used by the HTTP handler here and
// (through a small interface) by fan-out's WebSocket. Replay rebuilds the
// voter state, counters and idempotency set from the ledger at start-up.
// The package also serves the poll admin endpoints (create, list, get,
// close) and the per-poll ledger export.
//
// Pipeline is safe for concurrent use. It starts no goroutines.
package ingest
