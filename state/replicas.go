package state

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"tally/crdt"
	"tally/poll"
)

// This file holds what gossip needs of the state besides Merge: the
// definitions with their timestamps, this replica's own changed entries,
// and when each replica's state was last heard from.

// PollRegister returns a poll's definition with the timestamp of its write.
func (d *Definitions) PollRegister(id string) (crdt.Register[poll.Definition], bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.defs.Get(id)
}

// MergePoll applies a definition written elsewhere (created or closed in
// another region): it is persisted and kept if it is newer than the one
// held. It reports whether it won.
func (d *Definitions) MergePoll(reg crdt.Register[poll.Definition]) (bool, error) {
	return d.PutPoll(reg.Value, reg.TS)
}

// OwnDelta returns this replica's entries of the poll changed after
// version since, and the version they bring the caller up to. A caller
// that publishes the delta passes the returned version next time.
func (s *State) OwnDelta(pollID string, since uint64) (*crdt.Tally, uint64, error) {
	ps, err := s.poll(pollID)
	if err != nil {
		return nil, 0, err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	s.fold(ps)
	// This replica's own entries, and its corrections of gone replicas'
	// counters (steward.go): it alone writes both.
	// With them go the entries of gone replicas it sends on (steward.go).
	// And the record counts of the replicas it holds copies of as their
	// buddy: a replica lost before its own delta went out is known to
	// have taken votes all the same (certification reads it from the copy).
	own := func(r string, records bool) bool {
		return r == s.replica || stewardedBy(r, s.replica) || ps.echo[r] || records && ps.held[r]
	}
	return ps.tally.DeltaWhere(own, since), ps.tally.Version(), nil
}

// Heard is when state from a replica last arrived, and from which region.
type Heard struct {
	Replica string
	Region  string
	AtMs    int64 // unix milliseconds
}

// Replicas records when each replica was last heard from; gossip writes
// it, fan-out and the cluster endpoint read it.
type Replicas struct {
	mu sync.Mutex
	m  map[string]Heard
}

// Heard records that state sent by replica (of region) arrived at atMs.
// Older reports than the one held are ignored.
func (r *Replicas) Heard(replica, region string, atMs int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[string]Heard)
	}
	if cur, ok := r.m[replica]; ok && cur.AtMs >= atMs {
		return
	}
	r.m[replica] = Heard{Replica: replica, Region: region, AtMs: atMs}
}

// HeardAt returns when replica was last heard from.
func (r *Replicas) HeardAt(replica string) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.m[replica]
	return h.AtMs, ok
}

// HeardFrom returns every replica heard from, sorted by replica id.
func (r *Replicas) HeardFrom() []Heard {
	r.mu.Lock()
	out := slices.Collect(maps.Values(r.m))
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Heard) int { return strings.Compare(a.Replica, b.Replica) })
	return out
}

// RegionsHeard returns, per region, the newest time any of its replicas
// was heard from (unix milliseconds).
func (r *Replicas) RegionsHeard() map[string]int64 {
	out := make(map[string]int64)
	for _, h := range r.HeardFrom() {
		out[h.Region] = max(out[h.Region], h.AtMs)
	}
	return out
}

// OwnCounts returns this replica's (P, N) per option of the poll and its
// record count, as its cells hold them now (for checkpoints).
func (s *State) OwnCounts(pollID string) (map[string][2]uint64, uint64, error) {
	ps, err := s.poll(pollID)
	if err != nil {
		return nil, 0, err
	}
	out := make(map[string][2]uint64, len(ps.local.options))
	for option, col := range ps.local.options {
		p, n := ps.local.sum(col)
		out[option] = [2]uint64{p, n}
	}
	return out, ps.local.recordCount(), nil
}
