package ledger

import (
	"fmt"
	"hash/maphash"

	"github.com/cockroachdb/pebble"
)

// idemFilter remembers a 64-bit hash of every idempotency key in the
// index, so the committer can tell a new key from a possible retry without
// a Pebble lookup: a lookup in the memtable's skiplist cost half the CPU of
// an append. A hash it has not seen is certainly new; a hash it has seen is
// confirmed against the index (a collision is astronomically rare, but
// handled). It costs about 20 bytes of memory per ledgered vote.
//
// Only the committer goroutine touches it after Open.
type idemFilter struct {
	seed maphash.Seed
	set  map[uint64]struct{}
}

func newIdemFilter() *idemFilter {
	return &idemFilter{seed: maphash.MakeSeed(), set: make(map[uint64]struct{})}
}

func (f *idemFilter) hash(key []byte) uint64 { return maphash.Bytes(f.seed, key) }

// mayContain reports whether key may be in the index.
func (f *idemFilter) mayContain(key []byte) bool {
	_, ok := f.set[f.hash(key)]
	return ok
}

func (f *idemFilter) add(key []byte) { f.set[f.hash(key)] = struct{}{} }

// load adds every key of the idempotency index.
func (f *idemFilter) load(db *pebble.DB) error {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIdem}, UpperBound: []byte{prefixIdem + 1}})
	if err != nil {
		return fmt.Errorf("ledger: cannot load idempotency keys: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		f.add(it.Key())
	}
	return it.Error()
}
