package ingest

import (
	"fmt"
)

// Fence makes this node's ledger final for one poll: from now on the node
// takes no new vote for it (they answer as past its grace: 409
// poll_closed, or too_late for a quiz question), a mark kept in the
// ledger's metadata so a restart keeps it; then it waits for the requests
// already past their checks to reach the ledger. Certification fences
// every replica of a poll past its grace before it reads the replica's
// last records (docs/certification.md): no record of the poll can land
// there after the ones it read, however slow the replica's clock. The
// caller checks that the poll's grace is over; other polls, and the
// node's clock, are untouched.
func (p *Pipeline) Fence(pollID string) error {
	if fenced, _ := p.fenced.Load(pollID); fenced != true {
		if err := p.cfg.Ledger.PutMeta(fenceKey(pollID), []byte{1}); err != nil {
			return fmt.Errorf("ingest: cannot fence poll %q: %w", pollID, err)
		}
		p.fenced.Store(pollID, true)
	}
	p.stamping.Lock()
	//lint:ignore SA2001 an empty critical section: waiting for the holders is the point
	p.stamping.Unlock()
	return nil
}

// isFenced reports whether the poll was fenced here (Fence), from the
// ledger's metadata the first time a poll is asked about. A request holds
// p.stamping shared while it asks, so a fence either sees it through or
// it sees the fence.
func (p *Pipeline) isFenced(pollID string) bool {
	if v, ok := p.fenced.Load(pollID); ok {
		return v.(bool)
	}
	_, ok, err := p.cfg.Ledger.Meta(fenceKey(pollID))
	if err != nil {
		return false // the ledger's own error reaches the request at its append
	}
	v, _ := p.fenced.LoadOrStore(pollID, ok) // a fence in between wins
	return v.(bool)
}

// fenceKey is where a poll's fence is kept in the ledger's metadata.
func fenceKey(pollID string) string { return "fence/" + pollID }
