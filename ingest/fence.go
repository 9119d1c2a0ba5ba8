package ingest

import (
	"encoding/binary"
	"fmt"

	"tally/poll"
)

// Fence makes this node's ledger final for one poll as of the fence's time
// wall (Unix ms, past the poll's grace): from now on, while the poll's
// grace ends by wall, the node takes no new vote for it (they answer as
// past its grace: 409 poll_closed, or too_late for a quiz question), a
// mark kept in the ledger's metadata so a restart keeps it; then it waits
// for the requests already past their checks to reach the ledger.
// Certification fences every replica of a poll before it reads the
// replica's last records (docs/certification.md): no record of the poll
// can land there after the ones it read, however slow the replica's
// clock. A poll extended past wall later takes votes again (the fence
// covered the close it was taken under). The caller checks that the
// poll's grace is over by wall; other polls, and the node's clock, are
// untouched.
func (p *Pipeline) Fence(pollID string, wall int64) error {
	if wall <= p.fenceOf(pollID) {
		// Already fenced this far: only wait for the requests in flight.
	} else {
		if err := p.cfg.Ledger.PutMeta(fenceKey(pollID), binary.BigEndian.AppendUint64(nil, uint64(wall))); err != nil {
			return fmt.Errorf("ingest: cannot fence poll %q: %w", pollID, err)
		}
		p.fenced.Store(pollID, wall)
	}
	p.stamping.Lock()
	//lint:ignore SA2001 an empty critical section: waiting for the holders is the point
	p.stamping.Unlock()
	return nil
}

// Settle waits for the requests already past their checks to reach the
// ledger and be answered. A close written before Settle is called is seen
// by every request answered after it returns: a request reads the poll's
// definition again once it holds the lock Settle takes whole (submit,
// VoteBatch), so no vote read under the old close is answered "accepted"
// after the close is (docs/certification.md, "The close").
func (p *Pipeline) Settle() {
	p.stamping.Lock()
	//lint:ignore SA2001 an empty critical section: waiting for the holders is the point
	p.stamping.Unlock()
}

// isFenced reports whether the poll, as defined now, is fenced at p: a
// fence taken at or after its grace's end.
func isFenced(p *Pipeline, def *poll.Definition) bool {
	wall := p.fenceOf(def.ID)
	return wall > 0 && wall >= def.GraceEnd()
}

// fenceOf is the time the poll was fenced at here (0: never), from the
// ledger's metadata the first time a poll is asked about. A request holds
// p.stamping shared while it asks, so a fence either sees it through or
// it sees the fence.
func (p *Pipeline) fenceOf(pollID string) int64 {
	if v, ok := p.fenced.Load(pollID); ok {
		return v.(int64)
	}
	b, ok, err := p.cfg.Ledger.Meta(fenceKey(pollID))
	var wall int64
	switch {
	case err != nil:
		return 0 // the ledger's own error reaches the request at its append
	case ok && len(b) == 8:
		wall = int64(binary.BigEndian.Uint64(b))
	}
	v, _ := p.fenced.LoadOrStore(pollID, wall) // a fence in between wins
	return v.(int64)
}

// fenceKey is where a poll's fence is kept in the ledger's metadata.
func fenceKey(pollID string) string { return "fence/" + pollID }
