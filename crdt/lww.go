package crdt

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"tally/hlc"
)

// Register is a last-writer-wins register: of two writes, the one with the
// larger hybrid logical timestamp wins (the replica id in the timestamp
// breaks ties, so two writes never compare equal unless they are the same
// write). The zero value is an unset register.
type Register[T any] struct {
	TS    hlc.Timestamp `json:"ts"`
	Value T             `json:"value"`
}

// IsSet reports whether the register was ever written.
func (r *Register[T]) IsSet() bool { return !r.TS.IsZero() }

// Set writes v at ts if ts is newer than the current write, and reports
// whether it did.
func (r *Register[T]) Set(ts hlc.Timestamp, v T) bool {
	if ts.Compare(r.TS) <= 0 {
		return false
	}
	r.TS, r.Value = ts, v
	return true
}

// Merge keeps the newer of the two writes and reports whether r changed.
func (r *Register[T]) Merge(o Register[T]) bool { return r.Set(o.TS, o.Value) }

// Map is a last-writer-wins map: a Register per key. Deleting is writing a
// tombstone value chosen by the caller. The zero value is ready to use.
type Map[K cmp.Ordered, V any] struct {
	m map[K]Register[V]
}

// Set writes v under key at ts if newer, and reports whether it did.
func (m *Map[K, V]) Set(key K, ts hlc.Timestamp, v V) bool {
	r := m.m[key]
	if !r.Set(ts, v) {
		return false
	}
	if m.m == nil {
		m.m = make(map[K]Register[V])
	}
	m.m[key] = r
	return true
}

// Replace stores r under key whatever its timestamp: for callers that
// join versions themselves (a join of two writes may keep the older
// stamp's fields).
func (m *Map[K, V]) Replace(key K, r Register[V]) {
	if m.m == nil {
		m.m = make(map[K]Register[V])
	}
	m.m[key] = r
}

// Get returns the register under key.
func (m *Map[K, V]) Get(key K) (Register[V], bool) {
	r, ok := m.m[key]
	return r, ok
}

// Keys returns the keys, sorted.
func (m *Map[K, V]) Keys() []K { return slices.Sorted(maps.Keys(m.m)) }

// Len returns the number of keys.
func (m *Map[K, V]) Len() int { return len(m.m) }

// Delete drops key locally. It is not a replicated removal: a peer's
// merge can bring the key back, so callers keep their own tombstones.
func (m *Map[K, V]) Delete(key K) { delete(m.m, key) }

// Merge merges every register of o into m and reports whether m changed.
func (m *Map[K, V]) Merge(o *Map[K, V]) bool {
	changed := false
	for k, r := range o.m {
		changed = m.Set(k, r.TS, r.Value) || changed
	}
	return changed
}

// Since returns a map of the registers written after ts: the delta a
// replica that has seen everything up to ts needs.
func (m *Map[K, V]) Since(ts hlc.Timestamp) *Map[K, V] {
	out := &Map[K, V]{}
	for k, r := range m.m {
		if ts.Less(r.TS) {
			out.Set(k, r.TS, r.Value)
		}
	}
	return out
}

// mapEntry is one key's register on the wire.
type mapEntry[K cmp.Ordered, V any] struct {
	Key   K             `json:"key"`
	TS    hlc.Timestamp `json:"ts"`
	Value V             `json:"value"`
}

// MarshalJSON encodes the map as a list of {key, ts, value}, sorted by key.
func (m *Map[K, V]) MarshalJSON() ([]byte, error) {
	entries := make([]mapEntry[K, V], 0, len(m.m))
	for _, k := range m.Keys() {
		r := m.m[k]
		entries = append(entries, mapEntry[K, V]{Key: k, TS: r.TS, Value: r.Value})
	}
	return json.Marshal(entries)
}

// UnmarshalJSON decodes the form written by MarshalJSON, merging into m.
// An entry without a timestamp is rejected with ErrMalformed.
func (m *Map[K, V]) UnmarshalJSON(b []byte) error {
	var entries []mapEntry[K, V]
	if err := json.Unmarshal(b, &entries); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	for i, e := range entries {
		if e.TS.IsZero() {
			return fmt.Errorf("%w: entry %d has no timestamp", ErrMalformed, i)
		}
		m.Set(e.Key, e.TS, e.Value)
	}
	return nil
}
