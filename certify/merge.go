package certify

import (
	"tally/ledger"
)

// The copies' incremental merge: while a poll runs, every record the
// prefetch copies also goes into the poll's ledger.Merge (its duplicate
// rule and voters' standing records kept as records arrive), so that at
// close the certificate is the merge's Result — a pass over the voters —
// instead of ReconcileChains over every record. The merge is an
// optimisation only: whenever it does not hold exactly the records the
// attempt collected (a copy dropped and read again, a replica excluded, a
// tail longer than what it holds), the attempt reconciles the copies
// whole, with the same result.

// mergeOf returns the poll's merge, made when missing; nil when the copies
// keep no merges (no prefetch) or the poll's was given up; create makes
// a missing one.
func (cs *copies) mergeOf(poll string, create bool) *ledger.Merge {
	if cs.max <= 0 {
		return nil
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	m, ok := cs.merges[poll]
	if !ok && create {
		m = ledger.NewMerge(poll)
		cs.merges[poll] = m
	}
	return m
}

// giveUpMerge stops keeping the poll's merge: it no longer follows the
// copies, and the poll's certification reconciles them whole.
func (cs *copies) giveUpMerge(poll string) {
	cs.mu.Lock()
	cs.merges[poll] = nil
	cs.mu.Unlock()
}

// feed adds to the poll's merge the records of c it does not hold yet;
// the caller holds c.mu. At close (atClose) a tail longer than what the
// merge already holds gives the merge up: over most of the records,
// ReconcileChains is cheaper than the merge's maps.
func (cs *copies) feed(c *chainCopy, atClose bool) {
	m := cs.mergeOf(c.poll, !atClose)
	if m == nil {
		return
	}
	merged, all := m.Records(c.replica)
	recs := c.records()
	if uint64(len(recs)) < merged {
		cs.giveUpMerge(c.poll) // the copy was dropped and is read again
		return
	}
	tail := recs[merged:]
	if atClose && uint64(len(tail)) > all {
		cs.giveUpMerge(c.poll)
		return
	}
	for _, r := range tail {
		if m.Add(r) != nil {
			cs.giveUpMerge(c.poll)
			return
		}
	}
}

// reconcile is the attempt's exact result over the collected chains (in
// replicas' order): the merge's, when it holds exactly those records,
// else ReconcileChains'. incremental says which.
func (c *Certifier) reconcile(cfg ledger.ReconcileConfig, chains [][]*ledger.Record) (res *ledger.Result, incremental bool, err error) {
	if m := c.copies.mergeOf(cfg.Poll, false); m != nil {
		if res, err := m.Result(cfg); err == nil && holdsExactly(res.Replicas, chains) {
			return res, true, nil
		}
	}
	res, err = ledger.ReconcileChains(cfg, chains...)
	return res, false, err
}

// holdsExactly reports whether merged names the same records as chains:
// the same replicas, each with as many records and the same head (the
// hash chain makes the head stand for every record before it).
func holdsExactly(merged []ledger.Chain, chains [][]*ledger.Record) bool {
	var want []ledger.Chain
	for _, recs := range chains {
		if n := len(recs); n > 0 {
			last := recs[n-1]
			want = append(want, ledger.Chain{Poll: last.Poll, Replica: last.Replica, Records: uint64(n), Head: last.Hash()})
		}
	}
	if len(want) != len(merged) {
		return false
	}
	have := map[string]ledger.Chain{}
	for _, ch := range merged {
		have[ch.Replica] = ch
	}
	for _, w := range want {
		if have[w.Replica] != w {
			return false
		}
	}
	return true
}
