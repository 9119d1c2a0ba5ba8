// Package node wires one Tally node together: configuration (flags with
// TALLY_* environment fallbacks), the data directory (replica id, admin
// token, IP salt, HLC high-water mark, the Pebble ledger), start order
// (open the ledger, load poll definitions, replay the ledger into the
// counters, then report ready), HTTP routes, the Prometheus registry, and
// graceful shutdown (stop accepting, finish in-flight requests, close the
// ledger).
//
// A Node owns every goroutine it starts; Run returns after all of them
// have stopped.
package node
