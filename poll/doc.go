// Package poll defines polls and their lifecycle: a question, 2–32 options,
// when voting opens, when it closes, and a grace window after the close in
// which votes are still ledgered (as late) but not counted.
//
// A poll's status is derived from the clock, never stored: scheduled before
// opens_at, open until closes_at, closed after it, reconciled once a
// certified result exists. Definitions are replicated as last-writer-wins
// registers (crdt.Register) ordered by hybrid logical time, so a "close now"
// in any region is a newer write of the same register. Registry keeps them
// in memory, safe for concurrent use, and persists them through a Store.
//
// The package imports crdt and hlc of this module, nothing else.
package poll
