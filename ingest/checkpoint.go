package ingest

import (
	"io"

	"tally/state"
)

// WriteCheckpoint snapshots the vote state (state.Checkpoint) and writes it
// to w. Votes are held back only while the state is copied, not while it
// is written: the copy is taken with no vote between its ledger append and
// its count, so every record up to each poll's chain head is in the
// snapshot and none after it.
func (p *Pipeline) WriteCheckpoint(w io.Writer, heads state.Heads) (polls, ballots int, err error) {
	p.inflight.Lock()
	cp, err := p.cfg.State.Snapshot(heads)
	p.inflight.Unlock()
	if err != nil {
		return 0, 0, err
	}
	return cp.Write(w)
}
