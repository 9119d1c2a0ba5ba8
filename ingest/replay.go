package ingest

import (
	"fmt"
	"iter"

	"tally/ledger"
)

// Replay rebuilds this replica's ballots (the voter state), this replica's counters and the
// idempotency set from the ledger's records, as they stood before a
// restart. Records of other replicas (imported for audits) are skipped:
// their counts arrive by gossip. It returns how many records it applied.
func (p *Pipeline) Replay(records iter.Seq2[ledger.Record, error], replica string) (int, error) {
	n := 0
	for r, err := range records {
		if err != nil {
			return n, err
		}
		if r.Replica != replica {
			continue
		}
		def, ok := p.cfg.State.Defs.Poll(r.Poll)
		if _, aside := p.cfg.State.Defs.SetAside()[r.Poll]; !ok && (aside || p.cfg.State.Defs.Forgotten(r.Poll)) {
			continue // set aside at load, or certified and past retention: not served, records kept
		}
		if !ok {
			return n, fmt.Errorf("ingest: ledger holds votes for poll %q, which has no definition", r.Poll)
		}
		if option, ok := def.OptionID(r.Option); ok {
			r.Option = option
		}
		if err := p.count(&r, p.cfg.State.Hash(r.Voter), p.cfg.State.Hash(r.Idem)); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
