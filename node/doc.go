// Package node wires one Tally node together: configuration (flags with
// TALLY_* environment fallbacks), the data directory (replica id, admin
// token, IP salt, HLC high-water mark, the Pebble ledger), start order
// (open the ledger, load poll definitions, replay the ledger into the
// counters, then report ready), HTTP routes, the Prometheus registry, and
// graceful shutdown (stop accepting, finish in-flight requests, close the
// ledger).
//
// Open opens (openState, then each room with its config written one field
// a line); Run serves (run.go: serveSide, replayLedger, runUntilDone,
// whose background loops one WaitGroup owns) until its context ends or
// Close is called, and shuts down in one place (shutdown). Close(ctx)
// waits for that, or closes a node that was opened and never run. Features live in their own rooms — join codes (join), QR
// codes (qr), the backup (internal/backup), the exactness metrics
// (certify) — and node only wires them.
//
// A Node owns every goroutine it starts; Run returns after all of them
// have stopped.
package node
