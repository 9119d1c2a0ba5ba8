package ingest

import (
	"hash/maphash"
	"sync"
)

// acks remembers a 64-bit hash of every idempotency key this node ledgered,
// per poll, up to a bound: about 20 bytes a vote instead of the key itself.
// A miss in a complete set is a certain "new vote"; a hit is confirmed
// against the ledger index (which also gives the first vote id), so a hash
// collision can never turn a new vote into a duplicate. Once the bound is
// reached the set stops growing and every key is checked in the ledger.
type acks struct {
	max  int
	seed maphash.Seed

	mu    sync.RWMutex
	polls map[string]*pollAcks
}

type pollAcks struct {
	m          map[uint64]struct{}
	incomplete bool
}

func newAcks(max int) *acks {
	return &acks{max: max, seed: maphash.MakeSeed(), polls: make(map[string]*pollAcks)}
}

// mayHave reports whether (poll, idem) may have been ledgered here; false
// is certain.
func (a *acks) mayHave(poll, idem string) bool {
	h := maphash.String(a.seed, idem)
	a.mu.RLock()
	defer a.mu.RUnlock()
	p, ok := a.polls[poll]
	if !ok {
		return false
	}
	if _, ok := p.m[h]; ok {
		return true
	}
	return p.incomplete
}

// put remembers a ledgered key.
func (a *acks) put(poll, idem string) {
	h := maphash.String(a.seed, idem)
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.polls[poll]
	if !ok {
		p = &pollAcks{m: make(map[uint64]struct{})}
		a.polls[poll] = p
	}
	if len(p.m) >= a.max {
		p.incomplete = true
		return
	}
	p.m[h] = struct{}{}
}

// forget marks a poll's set incomplete: every key of it is then checked in
// the ledger (after a restart from a checkpoint, which keeps no keys).
func (a *acks) forget(poll string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.polls[poll] = &pollAcks{m: make(map[uint64]struct{}), incomplete: true}
}

// drop forgets the poll's keys entirely (the poll left memory).
func (a *acks) drop(poll string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.polls, poll)
}
