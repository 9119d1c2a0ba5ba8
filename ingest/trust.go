package ingest

import (
	"hash/maphash"
	"math"
	"net/netip"
	"sync"
	"time"

	"tally/ledger"
)

// Signals are what a vote's trust score is computed from. Each is a fact
// about the vote's client at the moment it arrives.
type Signals struct {
	SincePrevious time.Duration // since this voter's previous vote here; 0: none
	IPVotesPerMin float64       // votes from the client's address over the last minute, this one included
	IPVoters      int           // distinct voters seen from the address in the last 10 minutes
	TokenAge      time.Duration // age of the voter token; < 0: no token
	SocketAge     time.Duration // age of the WebSocket the vote came on; < 0: not over a socket
	Datacenter    bool          // the address is in a configured datacenter/proxy range
	// OverBudget: the voter token is past the ones its address group has
	// vouched (budget.go): one address never weighs more than its budget.
	OverBudget bool
}

// Score combines the signals multiplicatively into [0, 1]: each factor is
// 1 for what people do and shrinks for what scripts do, and none rises
// when its signal gets worse, so neither does the score. The thresholds
// leave room for people behind a carrier's shared address (hundreds of
// phones on one IP).
func Score(s Signals) float64 {
	f := 1.0
	switch { // a voter voting again almost at once
	case s.SincePrevious <= 0:
	case s.SincePrevious < 300*time.Millisecond:
		f *= 0.3
	case s.SincePrevious < time.Second:
		f *= 0.7
	}
	if s.IPVotesPerMin > 600 { // far beyond a busy shared address
		f *= math.Sqrt(600 / s.IPVotesPerMin)
	}
	if s.IPVoters > 300 {
		f *= math.Sqrt(300 / float64(s.IPVoters))
	}
	switch { // a token used the moment it was issued
	case s.TokenAge < 0:
	case s.TokenAge < time.Second:
		f *= 0.4
	case s.TokenAge < 3*time.Second:
		f *= 0.8
	}
	if s.SocketAge >= 0 && s.SocketAge < time.Second { // a socket opened to vote, not to watch
		f *= 0.6
	}
	if s.Datacenter {
		f *= 0.1
	}
	if s.OverBudget {
		f *= 0.1
	}
	return f
}

// ledger converts the signals to the form kept in the vote's record.
func (s Signals) ledger() *ledger.Signals {
	ms := func(d time.Duration) int64 {
		if d < 0 {
			return -1
		}
		return d.Milliseconds()
	}
	return &ledger.Signals{SincePrevMs: ms(s.SincePrevious), IPVotesPerMin: uint64(math.Round(s.IPVotesPerMin)), IPVoters: uint64(s.IPVoters),
		TokenAgeMs: ms(s.TokenAge), SocketAgeMs: ms(s.SocketAge), Datacenter: s.Datacenter, OverBudget: s.OverBudget}
}

// FromLedger is the inverse of the conversion above, for re-running the
// filter on exported records.
func FromLedger(l *ledger.Signals) Signals {
	d := func(ms int64) time.Duration {
		if ms < 0 {
			return -1
		}
		return time.Duration(ms) * time.Millisecond
	}
	return Signals{SincePrevious: d(l.SincePrevMs), IPVotesPerMin: float64(l.IPVotesPerMin), IPVoters: int(l.IPVoters),
		TokenAge: d(l.TokenAgeMs), SocketAge: d(l.SocketAgeMs), Datacenter: l.Datacenter, OverBudget: l.OverBudget}
}

// DefaultTrustFloor is the score under which a vote is shadowed.
const DefaultTrustFloor = 0.15

// tracker keeps per-address counts for the signals, bounded: idle
// addresses are swept as new ones arrive.
type tracker struct {
	seed   maphash.Seed
	shards [32]struct {
		mu      sync.Mutex
		m       map[string]*ipStats
		inserts int
	}
}

type ipStats struct {
	minute      time.Time // start of the current one-minute bucket
	cur, prev   float64   // votes in the current and the previous bucket
	votersSince time.Time
	voters      distinct // distinct voters in the window
	last        time.Time
}

const votersWindow = 10 * time.Minute

func newTracker() *tracker {
	t := &tracker{seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].m = make(map[string]*ipStats)
	}
	return t
}

// observe records a vote by voter from ip at now and returns the address's
// votes per minute (sliding, this one included) and distinct voters.
func (t *tracker) observe(ip, voter string, now time.Time) (perMin float64, voters int) {
	sh := &t.shards[maphash.String(t.seed, ip)%uint64(len(t.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.m[ip]
	if s == nil {
		sh.inserts++
		if sh.inserts%1024 == 0 { // sweep idle addresses now and then
			for k, v := range sh.m {
				if now.Sub(v.last) > votersWindow {
					delete(sh.m, k)
				}
			}
		}
		s = &ipStats{minute: now, votersSince: now, voters: newDistinct()}
		sh.m[ip] = s
	}
	s.last = now
	switch elapsed := now.Sub(s.minute); {
	case elapsed >= 2*time.Minute:
		s.minute, s.cur, s.prev = now, 0, 0
	case elapsed >= time.Minute:
		s.minute, s.prev, s.cur = s.minute.Add(time.Minute), s.cur, 0
	}
	s.cur++
	frac := 1 - float64(now.Sub(s.minute))/float64(time.Minute)
	perMin = s.cur + s.prev*max(frac, 0)
	if now.Sub(s.votersSince) > votersWindow {
		s.votersSince, s.voters = now, newDistinct()
	}
	s.voters.add(maphash.String(t.seed, voter))
	return perMin, s.voters.count()
}

// ranges is a list of address ranges (datacenters, proxies).
type ranges []netip.Prefix

func (r ranges) contains(ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range r {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
