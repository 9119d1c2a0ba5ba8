package ingest

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"time"
)

// tracker keeps per-address counts for the signals, bounded: idle
// addresses are swept as new ones arrive, once a shard has taken as many
// new addresses as it kept at its last sweep (at least 1,024), so a sweep
// costs O(1) an insert however many addresses there are and a shard holds
// at most about twice its live ones.
type tracker struct {
	seed   maphash.Seed
	shards [32]struct {
		mu      sync.Mutex
		m       map[string]*ipStats
		inserts int // since the last sweep
		kept    int // addresses the last sweep kept
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
		if sh.inserts >= max(1024, sh.kept) {
			for k, v := range sh.m {
				if now.Sub(v.last) > votersWindow {
					delete(sh.m, k)
				}
			}
			sh.inserts, sh.kept = 0, len(sh.m)
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
