package ingest

import (
	"fmt"

	"tally/hlc"
)

// Fence makes this node's ledger final up to ts: it folds ts into the
// hybrid clock, so every vote stamped from now on orders after it, then
// waits for the requests already past their checks (stamped, or being
// stamped, with an earlier time) to reach the ledger. Certification fences
// every replica with a time past the poll's grace before it reads the
// replica's last records (docs/certification.md): no record of the poll
// can land after the ones it read, whatever the replica's clock said. A ts
// too far ahead of this node's clock (hlc.ErrSkew) is refused, and the
// caller gets the error.
func (p *Pipeline) Fence(ts hlc.Timestamp) error {
	if err := p.cfg.Clock.Update(ts); err != nil {
		return fmt.Errorf("ingest: cannot fence at %s: %w", ts, err)
	}
	p.stamping.Lock()
	//lint:ignore SA2001 an empty critical section: waiting for the holders is the point
	p.stamping.Unlock()
	return nil
}
