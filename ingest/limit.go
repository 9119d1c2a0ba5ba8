package ingest

import (
	"hash/maphash"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter is a set of token buckets keyed by client IP or voter id. Idle
// buckets are swept as new keys arrive, so memory stays bounded by the
// number of recently active keys.
type limiter struct {
	rate   rate.Limit
	burst  int
	seed   maphash.Seed
	shards [32]struct {
		mu      sync.Mutex
		m       map[string]*bucket
		inserts int
	}
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

const idleBucket = 2 * time.Minute

// newLimiter returns a limiter of perSecond events with the given burst;
// perSecond ≤ 0 disables it (nil).
func newLimiter(perSecond float64, burst int) *limiter {
	if perSecond <= 0 {
		return nil
	}
	l := &limiter{rate: rate.Limit(perSecond), burst: max(burst, 1), seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = make(map[string]*bucket)
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
	sh := &l.shards[maphash.String(l.seed, key)%uint64(len(l.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b, found := sh.m[key]
	if !found {
		b = &bucket{lim: rate.NewLimiter(l.rate, l.burst)}
		sh.m[key] = b
		if sh.inserts++; sh.inserts%4096 == 0 {
			for k, old := range sh.m {
				if now.Sub(old.last) > idleBucket {
					delete(sh.m, k)
				}
			}
		}
	}
	b.last = now
	if n > l.burst {
		return false, time.Second, nil
	}
	r := b.lim.ReserveN(now, n)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d, nil
	}
	return true, 0, func() { r.CancelAt(now) }
}
