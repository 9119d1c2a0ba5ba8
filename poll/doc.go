// Package poll defines polls and their lifecycle: a question, 2–32 options,
// when voting opens, when it closes, and a grace window after the close in
// which votes are still ledgered (as late) but not counted.
//
// A poll's status is derived from the clock, never stored: scheduled before
// opens_at, open until closes_at, closed after it, reconciled once a
// certified result exists. Package state replicates definitions as
// last-writer-wins registers ordered by hybrid logical time, so a "close
// now" in any region is a newer write of the same register, and persists
// them in the ledger's metadata. A Definition is a plain value.
//
// The package imports hlc, ids and quiz of this module, nothing else.
package poll
