package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"hash/maphash"
	"net/http"
	"sync"
	"tally/api"
	"tally/poll"
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

// reserve takes n tokens of key's bucket, or none: it reports whether it
// did, and otherwise how long until it could; the token is what gives
// them back (the request failed later).
func (l *limiter) reserve(key string, n int, now time.Time) (ok bool, retryAfter time.Duration, t token) {
	if l == nil {
		return true, 0, token{}
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
		return false, time.Second, token{}
	}
	if b.tokens < want {
		sh.m[h] = b
		return false, time.Duration((want - b.tokens) / l.rate * 1e9), token{}
	}
	b.tokens -= want
	sh.m[h] = b
	return true, 0, token{l: l, h: h, n: want}
}

// token is a reservation reserve took, as a value: giving it back costs
// no closure (a socket vote reserved two, allocating four).
type token struct {
	l *limiter // nil: nothing taken
	h uint64
	n float64
}

// giveBack returns the token's reservation to its bucket.
func (t token) giveBack() {
	if t.l == nil {
		return
	}
	sh := &t.l.shards[t.h%uint64(len(t.l.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if g, ok := sh.m[t.h]; ok {
		g.tokens = min(t.l.burst, g.tokens+t.n)
		sh.m[t.h] = g
	}
}

// tokens are the reservations of one request: the address's and, in
// place for a small batch, its voters'.
type tokens struct {
	small [4]token
	more  []token
	n     int
}

func (ts *tokens) add(t token) {
	if ts.n < len(ts.small) {
		ts.small[ts.n] = t
	} else {
		ts.more = append(ts.more, t)
	}
	ts.n++
}

// giveBack returns every reservation (the request failed later).
func (ts *tokens) giveBack() {
	for i := range min(ts.n, len(ts.small)) {
		ts.small[i].giveBack()
	}
	for _, t := range ts.more {
		t.giveBack()
	}
	*ts = tokens{}
}

// reserveRates takes the rate limits' tokens for the new votes into ts:
// the client's address pays for every one, each voter for its own. On a
// refusal it takes none; otherwise ts.giveBack returns them (the request
// failed later).
func (p *Pipeline) reserveRates(ts *tokens, def *poll.Definition, addr string, votes []Vote, fresh []int, now time.Time) error {
	ipLim, voteLim := p.limitersFor(def)
	ok, wait, t := ipLim.reserve(addr, len(fresh), now)
	if !ok {
		return rateLimited(wait, "too many votes from this address")
	}
	ts.add(t)
	for _, i := range fresh {
		ok, wait, t := voteLim.reserve(votes[i].Voter, 1, now)
		if !ok {
			ts.giveBack()
			return rateLimited(wait, "too many votes from voter %q", votes[i].Voter)
		}
		ts.add(t)
	}
	return nil
}

func (p *Pipeline) hashIP(ip string) string {
	var buf [128]byte // salt and address on the stack: one allocation, the string
	sum := sha256.Sum256(append(append(buf[:0], p.cfg.IPSalt...), ip...))
	var out [32]byte
	hex.Encode(out[:], sum[:16])
	return string(out[:])
}

func rateLimited(wait time.Duration, format string, args ...any) error {
	e := api.Errorf(http.StatusTooManyRequests, api.CodeRateLimited, format, args...)
	e.RetryAfter = wait
	return e
}

// pollLimiters are one poll's own rate limits.
type pollLimiters struct {
	limits   poll.Limits
	ip, vote *limiter
}

// limitersFor returns the poll's own limiters where it sets limits, the
// node's otherwise.
func (p *Pipeline) limitersFor(def *poll.Definition) (ip, vote *limiter) {
	ip, vote = p.ipLim, p.voteLim
	if def.Limits == nil {
		return ip, vote
	}
	v, ok := p.pollLims.Load(def.ID)
	if !ok || v.(*pollLimiters).limits != *def.Limits { // first use, or the limits changed
		l := &pollLimiters{limits: *def.Limits,
			ip:   newLimiter(def.Limits.IPRate, int(max(1, 2*def.Limits.IPRate))),
			vote: newLimiter(def.Limits.VoterRate, int(max(1, 2*def.Limits.VoterRate)))}
		v, _ = p.pollLims.LoadOrStore(def.ID, l)
		if v.(*pollLimiters).limits != *def.Limits {
			p.pollLims.Store(def.ID, l)
			v = l
		}
	}
	pl := v.(*pollLimiters)
	if pl.ip != nil {
		ip = pl.ip
	}
	if pl.vote != nil {
		vote = pl.vote
	}
	return ip, vote
}

// ipv6Prefix is how many leading bits of an IPv6 address name a client.
func (p *Pipeline) ipv6Prefix() int {
	if p.cfg.IPv6Prefix == 0 {
		return DefaultIPv6Prefix
	}
	return p.cfg.IPv6Prefix
}
