package crdt

import (
	"maps"
	"slices"
)

// Tally is the replicated live count of one poll: a PN-counter per option
// and a G-counter of how many ledger records each replica holds for the
// poll. It tracks a local version that rises with every change, so
// DeltaSince can return just the entries changed after a version.
//
// The zero value is not ready; use NewTally.
type Tally struct {
	options map[string]*PNCounter
	records GCounter
	version uint64
	changed map[entryKey]uint64 // entry → version of its last change
}

// entryKey names one replica's entry: its (P, N) pair for an option, or its
// record count when option is empty and records is true.
type entryKey struct {
	option  string
	replica string
	records bool
}

// NewTally returns an empty tally.
func NewTally() *Tally {
	return &Tally{options: make(map[string]*PNCounter), changed: make(map[entryKey]uint64)}
}

// Add changes the replica's contribution to option by delta (a vote: +1;
// a vote moved away: -1).
func (t *Tally) Add(replica, option string, delta int64) {
	if delta == 0 {
		return
	}
	t.counter(option).Add(replica, delta)
	t.touch(entryKey{option: option, replica: replica})
}

// AddRecords adds n to the replica's ledger record count.
func (t *Tally) AddRecords(replica string, n uint64) {
	if n == 0 {
		return
	}
	t.records.Inc(replica, n)
	t.touch(entryKey{replica: replica, records: true})
}

// MergeEntry merges one replica's absolute (p, n) entry for option, as if
// merging a tally holding only that entry. It reports whether t changed.
func (t *Tally) MergeEntry(replica, option string, p, n uint64) bool {
	c := t.counter(option)
	cp := c.P.mergeEntry(replica, p)
	cn := c.N.mergeEntry(replica, n)
	if cp || cn {
		t.touch(entryKey{option: option, replica: replica})
		return true
	}
	return false
}

// MergeRecords merges one replica's absolute record count.
func (t *Tally) MergeRecords(replica string, n uint64) bool {
	if t.records.mergeEntry(replica, n) {
		t.touch(entryKey{replica: replica, records: true})
		return true
	}
	return false
}

// Merge folds o into t (max per entry) and reports whether t changed.
// Applying a delta from DeltaSince is a Merge.
func (t *Tally) Merge(o *Tally) bool {
	changed := false
	for option, c := range o.options {
		for _, r := range unionKeys(c.P.m, c.N.m) {
			changed = t.MergeEntry(r, option, c.P.m[r], c.N.m[r]) || changed
		}
	}
	for r, n := range o.records.m {
		changed = t.MergeRecords(r, n) || changed
	}
	return changed
}

// Replicas returns every replica with an entry in t (a count for any
// option or a record count), sorted.
func (t *Tally) Replicas() []string {
	seen := map[string]struct{}{}
	for _, c := range t.options {
		for _, r := range unionKeys(c.P.m, c.N.m) {
			seen[r] = struct{}{}
		}
	}
	for r := range t.records.m {
		seen[r] = struct{}{}
	}
	return slices.Sorted(maps.Keys(seen))
}

// Only returns a copy of t holding just the given options' counters (and
// every record count): what a receiver keeps of a peer's tally.
func (t *Tally) Only(options []string) *Tally {
	out := NewTally()
	for _, o := range options {
		if c, ok := t.options[o]; ok {
			for _, r := range unionKeys(c.P.m, c.N.m) {
				out.MergeEntry(r, o, c.P.m[r], c.N.m[r])
			}
		}
	}
	for r, n := range t.records.m {
		out.MergeRecords(r, n)
	}
	return out
}

// Value returns the live count of option.
func (t *Tally) Value(option string) int64 {
	if c, ok := t.options[option]; ok {
		return c.Value()
	}
	return 0
}

// Totals returns option → live count for every option with an entry.
func (t *Tally) Totals() map[string]int64 {
	out := make(map[string]int64, len(t.options))
	for option, c := range t.options {
		out[option] = c.Value()
	}
	return out
}

// Total returns the sum of all options' counts.
func (t *Tally) Total() int64 {
	var sum int64
	for _, c := range t.options {
		sum += c.Value()
	}
	return sum
}

// Options returns the options with an entry, sorted.
func (t *Tally) Options() []string { return slices.Sorted(maps.Keys(t.options)) }

// Counter returns a copy of option's PN-counter.
func (t *Tally) Counter(option string) PNCounter {
	if c, ok := t.options[option]; ok {
		return c.Clone()
	}
	return PNCounter{}
}

// Records returns the replica's ledger record count for the poll.
func (t *Tally) Records(replica string) uint64 { return t.records.Get(replica) }

// RecordCounts returns a copy of the per-replica record counts; never nil,
// so callers may add to it (a poll nobody voted in has no entries).
func (t *Tally) RecordCounts() map[string]uint64 {
	out := make(map[string]uint64, len(t.records.m))
	maps.Copy(out, t.records.m)
	return out
}

// Version returns the local version: it rises with every change.
func (t *Tally) Version() uint64 { return t.version }

// DeltaSince returns a tally holding the current value of every entry
// changed after version v. DeltaSince(0) is a full copy. Merging the delta
// into a replica that has seen everything up to v yields t's state.
func (t *Tally) DeltaSince(v uint64) *Tally {
	return t.delta(v, func(string, bool) bool { return true })
}

// DeltaOf is DeltaSince restricted to the entries of one replica: what a
// node gossips about itself on the fast path.
func (t *Tally) DeltaOf(replica string, v uint64) *Tally {
	return t.delta(v, func(r string, _ bool) bool { return r == replica })
}

// Touch marks every entry of replica as changed now, so the next
// DeltaSince carries them whether or not they changed (a node sending on
// another replica's entries with its own that depend on them).
func (t *Tally) Touch(replica string) {
	for k := range t.changed {
		if k.replica == replica {
			t.touch(k)
		}
	}
}

// DeltaWhere is DeltaSince for the entries keep accepts: a replica's
// counter entries (records false) or its record count (records true).
func (t *Tally) DeltaWhere(keep func(replica string, records bool) bool, v uint64) *Tally {
	return t.delta(v, keep)
}

func (t *Tally) delta(v uint64, keep func(string, bool) bool) *Tally {
	d := NewTally()
	for k, at := range t.changed {
		if at <= v || !keep(k.replica, k.records) {
			continue
		}
		if k.records {
			d.MergeRecords(k.replica, t.records.Get(k.replica))
			continue
		}
		c := t.options[k.option]
		d.MergeEntry(k.replica, k.option, c.P.Get(k.replica), c.N.Get(k.replica))
	}
	return d
}

// Empty reports whether t holds no entries.
func (t *Tally) Empty() bool { return len(t.changed) == 0 }

// Equal reports whether both tallies hold the same entries (versions are
// local and not compared).
func (t *Tally) Equal(o *Tally) bool {
	if !t.records.Equal(&o.records) {
		return false
	}
	for _, option := range unionKeys(t.options, o.options) {
		a, b := t.options[option], o.options[option]
		if a == nil {
			a = &PNCounter{}
		}
		if b == nil {
			b = &PNCounter{}
		}
		if !a.Equal(b) {
			return false
		}
	}
	return true
}

// Clone returns a deep copy, versions included.
func (t *Tally) Clone() *Tally {
	c := &Tally{
		options: make(map[string]*PNCounter, len(t.options)),
		records: t.records.Clone(),
		version: t.version,
		changed: maps.Clone(t.changed),
	}
	for option, pn := range t.options {
		cp := pn.Clone()
		c.options[option] = &cp
	}
	return c
}

func (t *Tally) counter(option string) *PNCounter {
	c, ok := t.options[option]
	if !ok {
		c = &PNCounter{}
		t.options[option] = c
	}
	return c
}

func (t *Tally) touch(k entryKey) {
	t.version++
	t.changed[k] = t.version
}

func unionKeys[V any](a, b map[string]V) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
