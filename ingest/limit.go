package ingest

import (
	"hash/maphash"
	"sync"
	"time"
)

// limiter is a set of token buckets keyed by client IP or voter id. Idle
// buckets are swept as new keys arrive, so memory stays bounded by the
// number of recently active keys. Keys are held as their 64-bit hash and a
// bucket is 16 bytes held in the map by value: a million voters in a
// broadcast are a million buckets, about 40 bytes each (with the key
// string and golang.org/x/time/rate's Limiter behind a pointer, 200). Two
// keys sharing a hash (odds 2^-64 a pair) would share a bucket.
type limiter struct {
	rate   float64 // tokens a second
	burst  float64
	seed   maphash.Seed
	shards [32]struct {
		mu      sync.Mutex
		m       map[uint64]bucket
		inserts int
	}
}

// bucket is a token bucket: tokens as of at (Unix ns).
type bucket struct {
	tokens float64
	at     int64
}

const idleBucket = 2 * time.Minute

// newLimiter returns a limiter of perSecond events with the given burst;
// perSecond ≤ 0 disables it (nil).
func newLimiter(perSecond float64, burst int) *limiter {
	if perSecond <= 0 {
		return nil
	}
	l := &limiter{rate: perSecond, burst: float64(max(burst, 1)), seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = make(map[uint64]bucket)
	}
	return l
}

// reserve takes n tokens for key at now and returns a func that gives them
// back (for a request refused by a later check). When the tokens are not
// available it takes none and returns how long to wait.
func (l *limiter) reserve(key string, n int, now time.Time) (ok bool, retryAfter time.Duration, undo func()) {
	if l == nil {
		return true, 0, func() {}
	}
	h := maphash.String(l.seed, key)
	sh := &l.shards[h%uint64(len(l.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ns := now.UnixNano()
	b, found := sh.m[h]
	if !found {
		b = bucket{tokens: l.burst, at: ns}
		if sh.inserts++; sh.inserts%4096 == 0 {
			for k, old := range sh.m {
				if ns-old.at > int64(idleBucket) {
					delete(sh.m, k)
				}
			}
		}
	}
	if elapsed := ns - b.at; elapsed > 0 { // a clock going back refills nothing
		b.tokens = min(l.burst, b.tokens+float64(elapsed)/1e9*l.rate)
		b.at = ns
	}
	want := float64(n)
	if want > l.burst {
		sh.m[h] = b
		return false, time.Second, nil
	}
	if b.tokens < want {
		sh.m[h] = b
		return false, time.Duration((want - b.tokens) / l.rate * 1e9), nil
	}
	b.tokens -= want
	sh.m[h] = b
	return true, 0, func() {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if g, ok := sh.m[h]; ok {
			g.tokens = min(l.burst, g.tokens+want)
			sh.m[h] = g
		}
	}
}
