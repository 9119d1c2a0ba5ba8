package ingest

import "sync"

// ack is what a retry is answered with.
type ack struct {
	voteID string
	late   bool
}

// acks remembers the acknowledgement of every idempotency key this node
// ledgered, per poll, up to a bound. While a poll's set is complete a miss
// is a certain "new"; once the bound is reached the set stops growing and
// misses are confirmed against the ledger index.
type acks struct {
	max int

	mu    sync.RWMutex
	polls map[string]*pollAcks
}

type pollAcks struct {
	m          map[string]ack
	incomplete bool
}

func newAcks(max int) *acks { return &acks{max: max, polls: make(map[string]*pollAcks)} }

// get returns the ack for (poll, idem); complete reports whether a miss is
// authoritative.
func (a *acks) get(poll, idem string) (ack ack, found, complete bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	p, ok := a.polls[poll]
	if !ok {
		return ack, false, true
	}
	ack, found = p.m[idem]
	return ack, found, !p.incomplete
}

// put remembers an ack; the first ack of a key stays.
func (a *acks) put(poll, idem string, k ack) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.polls[poll]
	if !ok {
		p = &pollAcks{m: make(map[string]ack)}
		a.polls[poll] = p
	}
	if _, ok := p.m[idem]; ok {
		return
	}
	if len(p.m) >= a.max {
		p.incomplete = true
		return
	}
	p.m[idem] = k
}
