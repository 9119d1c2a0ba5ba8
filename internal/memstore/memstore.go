package memstore

import (
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Store is a map standing in for the ledger's metadata space. The zero
// value is empty and ready.
type Store struct {
	mu sync.Mutex
	m  map[string][]byte
}

// PutMeta stores v under name.
func (s *Store) PutMeta(name string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[name] = v
	return nil
}

// PutMetaBatch stores names[i] = values[i].
func (s *Store) PutMetaBatch(names []string, values [][]byte, _ bool) error {
	for i, name := range names {
		s.PutMeta(name, values[i])
	}
	return nil
}

// DeleteMetaRange removes every name in [from, to).
func (s *Store) DeleteMetaRange(from, to string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.m {
		if k >= from && k < to {
			delete(s.m, k)
		}
	}
	return nil
}

// Get returns the value stored under name.
func (s *Store) Get(name string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[name]
	return v, ok
}

// MetaWithPrefix yields the names with prefix and their values, in name
// order, from a copy: the caller may write to the store meanwhile.
func (s *Store) MetaWithPrefix(prefix string) iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		s.mu.Lock()
		kept := map[string][]byte{}
		for k, v := range s.m {
			if strings.HasPrefix(k, prefix) {
				kept[k] = v
			}
		}
		s.mu.Unlock()
		for _, k := range slices.Sorted(maps.Keys(kept)) {
			if !yield(k, kept[k]) {
				return
			}
		}
	}
}
