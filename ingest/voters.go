package ingest

import (
	"hash/maphash"
	"sync"

	"tally/ledger"
)

// voterShards splits voter state so concurrent votes rarely share a lock.
const voterShards = 64

// voters holds, per poll and voter, the vote that currently counts: the
// latest counted vote by (HLC, replica, seq), the order Reconcile uses, so
// the live tally and the certified result agree.
type voters struct {
	seed   maphash.Seed
	shards [voterShards]struct {
		mu sync.Mutex
		m  map[voterKey]current
	}
}

type voterKey struct{ poll, voter string }

// current is the vote that counts for one voter.
type current struct {
	option  string
	wall    int64
	logical uint32
	replica string
	seq     uint64
}

func (c current) record() ledger.Record {
	return ledger.Record{Wall: c.wall, Logical: c.logical, Replica: c.replica, Seq: c.seq}
}

func newVoters() *voters {
	v := &voters{seed: maphash.MakeSeed()}
	for i := range v.shards {
		v.shards[i].m = make(map[voterKey]current)
	}
	return v
}

// apply makes r the voter's counted vote if it is the latest, calling move
// with the option that loses a vote ("" when none) and the one that gains
// it, under the voter's lock so concurrent votes of one voter serialize.
// Nothing is moved when r is older than the vote that counts, or picks the
// same option.
func (v *voters) apply(r *ledger.Record, move func(from, to string)) {
	k := voterKey{r.Poll, r.Voter}
	sh := &v.shards[maphash.String(v.seed, r.Voter)%voterShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	cur, ok := sh.m[k]
	if ok {
		c := cur.record()
		if !r.After(&c) {
			return
		}
	}
	sh.m[k] = current{option: r.Option, wall: r.Wall, logical: r.Logical, replica: r.Replica, seq: r.Seq}
	switch {
	case !ok:
		move("", r.Option)
	case cur.option != r.Option:
		move(cur.option, r.Option)
	}
}
