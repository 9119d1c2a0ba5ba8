package crdt

import (
	"maps"
	"slices"
)

// GCounter is a grow-only counter with one entry per replica. The zero value
// is an empty counter ready to use.
type GCounter struct {
	m map[string]uint64
}

// Inc adds n to the replica's entry.
func (g *GCounter) Inc(replica string, n uint64) {
	if n == 0 {
		return
	}
	if g.m == nil {
		g.m = make(map[string]uint64)
	}
	g.m[replica] += n
}

// Get returns the replica's entry.
func (g *GCounter) Get(replica string) uint64 { return g.m[replica] }

// Value returns the sum of all entries.
func (g *GCounter) Value() uint64 {
	var sum uint64
	for _, v := range g.m {
		sum += v
	}
	return sum
}

// Replicas returns the replica ids with an entry, sorted.
func (g *GCounter) Replicas() []string { return slices.Sorted(maps.Keys(g.m)) }

// mergeEntry raises the replica's entry to v if v is larger and reports
// whether it changed.
func (g *GCounter) mergeEntry(replica string, v uint64) bool {
	if v <= g.m[replica] {
		return false
	}
	if g.m == nil {
		g.m = make(map[string]uint64)
	}
	g.m[replica] = v
	return true
}

// Merge takes the maximum of each entry and reports whether g changed.
func (g *GCounter) Merge(o *GCounter) bool {
	changed := false
	for r, v := range o.m {
		changed = g.mergeEntry(r, v) || changed
	}
	return changed
}

// Equal reports whether both counters hold the same entries.
func (g *GCounter) Equal(o *GCounter) bool {
	for r, v := range g.m {
		if o.m[r] != v {
			return false
		}
	}
	for r, v := range o.m {
		if g.m[r] != v {
			return false
		}
	}
	return true
}

// Clone returns a deep copy.
func (g *GCounter) Clone() GCounter { return GCounter{m: maps.Clone(g.m)} }

// PNCounter is a counter that can go up and down: the value is the sum of
// the P (increments) entries minus the sum of the N (decrements) entries.
// The zero value is ready to use.
type PNCounter struct {
	P, N GCounter
}

// Add changes the replica's contribution by delta.
func (c *PNCounter) Add(replica string, delta int64) {
	if delta >= 0 {
		c.P.Inc(replica, uint64(delta))
	} else {
		c.N.Inc(replica, uint64(-delta))
	}
}

// Value returns P minus N.
func (c *PNCounter) Value() int64 { return int64(c.P.Value()) - int64(c.N.Value()) }

// Merge merges both halves and reports whether c changed.
func (c *PNCounter) Merge(o *PNCounter) bool {
	p := c.P.Merge(&o.P)
	n := c.N.Merge(&o.N)
	return p || n
}

// Equal reports whether both counters hold the same entries.
func (c *PNCounter) Equal(o *PNCounter) bool { return c.P.Equal(&o.P) && c.N.Equal(&o.N) }

// Clone returns a deep copy.
func (c *PNCounter) Clone() PNCounter { return PNCounter{P: c.P.Clone(), N: c.N.Clone()} }
