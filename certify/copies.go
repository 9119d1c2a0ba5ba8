package certify

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"tally/ledger"
)

// errBudget ends a copy's extension when the node holds as many copied
// records as it may; what is not copied is fetched at close.
var errBudget = errors.New("certify: prefetch budget reached")

// copies are this node's copies of replicas' chains of the polls that run
// or wait to be certified (prefetch.go fills them while a poll runs;
// Certify tops them up and reconciles them). Each copy is a verified
// prefix of one replica's chain: seq 1..n in order, each record's hash
// kept, each linked to the one before.
type copies struct {
	mu    sync.Mutex
	polls map[string]map[string]*chainCopy // poll → replica → copy
	held  atomic.Int64                     // records held, every poll's
	max   int64                            // records the prefetch may hold; Certify may go past it
	// merges are the polls' incremental merges of their copies (merge.go);
	// nil: given up.
	merges map[string]*ledger.Merge
}

func newCopies(max int) *copies {
	return &copies{polls: map[string]map[string]*chainCopy{}, max: int64(max), merges: map[string]*ledger.Merge{}}
}

// chainCopy is one replica's chain of one poll, as far as it is copied.
type chainCopy struct {
	poll, replica string
	// mu is held by whoever extends or reads the copy: the prefetch loop
	// (which skips a copy in use) or a certification attempt.
	mu    sync.Mutex
	recs  []*ledger.Record
	store []ledger.Record // the records, in chunks: no copying as the chain grows
	gone  bool            // dropped: its records no longer count as held
	n     atomic.Int64    // len(recs), readable without mu
}

// get returns the poll's copy of replica's chain, made empty when missing.
func (cs *copies) get(poll, replica string) *chainCopy {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	byReplica := cs.polls[poll]
	if byReplica == nil {
		byReplica = map[string]*chainCopy{}
		cs.polls[poll] = byReplica
	}
	c := byReplica[replica]
	if c == nil {
		c = &chainCopy{poll: poll, replica: replica}
		byReplica[replica] = c
	}
	return c
}

// count is how many records of replica's chain of the poll are copied.
func (cs *copies) count(poll, replica string) uint64 {
	cs.mu.Lock()
	c := cs.polls[poll][replica]
	cs.mu.Unlock()
	if c == nil {
		return 0
	}
	return uint64(c.n.Load())
}

// drop forgets one replica's copy of a poll (it conflicted with what the
// replica now hands over: the next attempt fetches its chain whole). The
// caller holds c.mu.
func (cs *copies) drop(c *chainCopy) {
	cs.mu.Lock()
	if cs.polls[c.poll][c.replica] == c {
		delete(cs.polls[c.poll], c.replica)
	}
	if _, ok := cs.merges[c.poll]; ok {
		cs.merges[c.poll] = nil // it holds the dropped copy's records
	}
	cs.mu.Unlock()
	c.release(cs)
}

// release takes c's records off the held count once; the caller holds c.mu.
func (c *chainCopy) release(cs *copies) {
	if !c.gone {
		c.gone = true
		cs.held.Add(-int64(len(c.recs)))
	}
}

// forget drops every copy of a poll (certified, or gone).
func (cs *copies) forget(poll string) {
	cs.mu.Lock()
	byReplica := cs.polls[poll]
	delete(cs.polls, poll)
	delete(cs.merges, poll)
	cs.mu.Unlock()
	for _, c := range byReplica {
		c.mu.Lock()
		c.release(cs)
		c.mu.Unlock()
	}
}

// polls lists the polls copies are held of.
func (cs *copies) pollIDs() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return slices.Collect(maps.Keys(cs.polls))
}

// extend appends what src adds to the copied chain and returns how many
// records it appended; the caller holds c.mu. A record at or below the
// copy's length must be the one copied (an export may start at the
// beginning); a new one must be the next seq and link to the last.
// Records of other polls or replicas are skipped. With bounded set, extend
// stops at the copies' budget (errBudget). On any error the copy keeps
// what it verified.
func (cs *copies) extend(c *chainCopy, src iter.Seq2[ledger.Record, error], bounded bool) (int, error) {
	added := 0
	for r, err := range src {
		if err != nil {
			return added, err
		}
		if r.Poll != c.poll || r.Replica != c.replica {
			continue
		}
		h := r.KeepHash()
		switch n := uint64(len(c.recs)); {
		case r.Seq == 0 || r.Seq > n+1:
			return added, fmt.Errorf("%w: %s/%s seq %d does not follow seq %d", ledger.ErrChain, c.poll, c.replica, r.Seq, n)
		case r.Seq <= n:
			if c.recs[r.Seq-1].Hash() != h {
				return added, fmt.Errorf("%w: two different records at %s/%s seq %d", ledger.ErrConflict, c.poll, c.replica, r.Seq)
			}
			continue
		case n > 0 && r.Prev != c.recs[n-1].Hash(), n == 0 && r.Prev != ledger.Hash{}:
			return added, fmt.Errorf("%w: %s/%s seq %d does not follow seq %d", ledger.ErrChain, c.poll, c.replica, r.Seq, n)
		}
		if !c.gone {
			if held := cs.held.Add(1); bounded && held > cs.max {
				cs.held.Add(-1)
				return added, errBudget
			}
		}
		if len(c.store) == cap(c.store) {
			c.store = make([]ledger.Record, 0, 8192)
		}
		c.store = append(c.store, r)
		c.recs = append(c.recs, &c.store[len(c.store)-1])
		c.n.Store(int64(len(c.recs)))
		added++
	}
	return added, nil
}

// records returns the copied chain so far; the caller holds c.mu. The
// slice stays valid and unchanged while the copy grows.
func (c *chainCopy) records() []*ledger.Record { return c.recs[:len(c.recs):len(c.recs)] }

// size is how many records the copies hold.
func (cs *copies) size() int64 { return cs.held.Load() }
