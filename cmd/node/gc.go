package main

import (
	"os"
	"runtime/debug"
)

// edgeGCPercent is an edge's GOGC. An edge's heap is mostly its viewers'
// sockets; with Go's default of 100 the heap grows to twice what is live
// before each collection, and that headroom was about a third of what a
// viewer cost: 14.4 KB of memory a viewer at 100, 11.6 KB at 50, with no
// measurable change in CPU per frame (3,000 viewers on an edge, BENCHMARKS.md
// "The core at the machine's limit"). GOGC in the environment wins.
const edgeGCPercent = 50

// tuneGC sets an edge's GOGC unless the environment sets one.
func tuneGC(role string) {
	if role == "edge" && os.Getenv("GOGC") == "" {
		debug.SetGCPercent(edgeGCPercent)
	}
}
