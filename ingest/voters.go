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
		mu    sync.Mutex
		polls map[string]map[string]current // poll → voter → current vote
	}
}

// current is the vote that counts for one voter: 40 bytes. Votes in the
// voter state are this replica's, so the replica is the same for all and
// (HLC, seq) orders them; option shares the caller's (interned) string.
type current struct {
	option  string
	wall    int64
	logical uint32
	seq     uint64
}

func newVoters() *voters {
	v := &voters{seed: maphash.MakeSeed()}
	for i := range v.shards {
		v.shards[i].polls = make(map[string]map[string]current)
	}
	return v
}

// apply makes r the voter's counted vote if it is the latest, calling move
// with the option that loses a vote ("" when none) and the one that gains
// it, under the voter's lock so concurrent votes of one voter serialize.
// Nothing is moved when r is older than the vote that counts, or picks the
// same option.
func (v *voters) shard(voter string) uint64 { return maphash.String(v.seed, voter) % voterShards }

func (v *voters) apply(r *ledger.Record, move func(from, to string)) {
	sh := &v.shards[v.shard(r.Voter)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	m, ok := sh.polls[r.Poll]
	if !ok {
		m = make(map[string]current)
		sh.polls[r.Poll] = m
	}
	cur, ok := m[r.Voter]
	if ok {
		c := ledger.Record{Wall: cur.wall, Logical: cur.logical, Replica: r.Replica, Seq: cur.seq}
		if !r.After(&c) {
			return
		}
	}
	m[r.Voter] = current{option: r.Option, wall: r.Wall, logical: r.Logical, seq: r.Seq}
	switch {
	case !ok:
		move("", r.Option)
	case cur.option != r.Option:
		move(cur.option, r.Option)
	}
}

// drop forgets every voter's vote in the poll.
func (v *voters) drop(poll string) {
	for i := range v.shards {
		sh := &v.shards[i]
		sh.mu.Lock()
		delete(sh.polls, poll)
		sh.mu.Unlock()
	}
}

// lastWall returns the HLC wall time of the voter's counted vote.
func (v *voters) lastWall(poll, voter string) (int64, bool) {
	sh := &v.shards[v.shard(voter)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c, ok := sh.polls[poll][voter]
	return c.wall, ok
}
