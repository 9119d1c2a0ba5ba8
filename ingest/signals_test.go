package ingest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestTrackerWindowsAndBounds(t *testing.T) {
	tr := newTracker()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var rate float64
	var voters int
	for i := range 120 {
		rate, voters = tr.observe("203.0.113.1", "v"+string(rune('a'+i%10)), now.Add(time.Duration(i)*500*time.Millisecond))
	}
	if rate < 100 || rate > 130 || voters != 10 {
		t.Fatalf("120 votes in 60 s from 10 voters: rate %v, voters %d", rate, voters)
	}
	// Two minutes of silence: the address starts over.
	if rate, _ = tr.observe("203.0.113.1", "va", now.Add(3*time.Minute)); rate != 1 {
		t.Fatalf("after silence: rate %v", rate)
	}
	// Many addresses, each once: idle ones are swept.
	for i := range 100_000 {
		tr.observe("10.0."+string(rune(i/256%256))+"."+string(rune(i%256)), "v", now.Add(20*time.Minute+time.Duration(i)*time.Millisecond))
	}
	total := 0
	for i := range tr.shards {
		total += len(tr.shards[i].m)
	}
	if total > 70_000 {
		t.Fatalf("%d addresses kept; idle ones should be swept", total)
	}
}

// The sweep is amortized: every address idle past the voters' window is
// gone once each shard has taken about as many new ones as it holds, and
// the live ones stay.
func TestTrackerSweepsIdleAddressesAtAnyScale(t *testing.T) {
	tr := newTracker()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const n = 80_000 // 2,500 a shard on average, past the 1,024 floor
	for i := range n {
		tr.observe(fmt.Sprintf("10.1.%d.%d", i/256, i%256), "v", now)
	}
	later := now.Add(votersWindow + time.Minute)
	for i := range n {
		tr.observe(fmt.Sprintf("10.2.%d.%d", i/256, i%256), "v", later)
	}
	old, live := 0, 0
	for i := range tr.shards {
		for ip := range tr.shards[i].m {
			if strings.HasPrefix(ip, "10.1.") {
				old++
			} else {
				live++
			}
		}
	}
	if old != 0 || live != n {
		t.Fatalf("kept %d idle and %d live addresses, want 0 and %d", old, live, n)
	}
}
