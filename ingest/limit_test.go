package ingest

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

func TestLimiterBuckets(t *testing.T) {
	l := newLimiter(2, 4) // 2 a second, burst 4
	now := time.Unix(1_800_000_000, 0)
	for i := range 4 {
		if ok, _, _ := l.reserve("v", 1, now); !ok {
			t.Fatalf("burst: refused at %d", i)
		}
	}
	ok, wait, _ := l.reserve("v", 1, now)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("past the burst: ok %v, wait %v (want 500ms)", ok, wait)
	}
	if ok, _, _ := l.reserve("w", 1, now); !ok {
		t.Fatal("another key shares the bucket")
	}
	if ok, _, _ := l.reserve("v", 1, now.Add(500*time.Millisecond)); !ok {
		t.Fatal("not refilled after 500 ms")
	}
	if ok, _, _ := l.reserve("v", 1, now.Add(400*time.Millisecond)); ok {
		t.Fatal("a clock going back refilled the bucket")
	}
	if ok, wait, _ := l.reserve("v", 5, now.Add(time.Hour)); ok || wait != time.Second {
		t.Fatalf("more than the burst at once: ok %v wait %v", ok, wait)
	}
	// Given back: a refused request's tokens return (never past the burst).
	later := now.Add(time.Hour)
	ok, _, undo := l.reserve("u", 4, later)
	if !ok {
		t.Fatal("full bucket refused its burst")
	}
	undo.giveBack()
	undo.giveBack()
	for i := range 4 {
		if ok, _, _ := l.reserve("u", 1, later); !ok {
			t.Fatalf("tokens not given back: refused at %d", i)
		}
	}
	if ok, _, _ := l.reserve("u", 1, later); ok {
		t.Fatal("giving back twice raised the bucket past its burst")
	}
	var off *limiter
	ok, _, undo = off.reserve("x", 100, now)
	if !ok {
		t.Fatal("a disabled limiter refused")
	}
	undo.giveBack() // gives back nothing, and does not fail
}

// BenchmarkLimiterMemory: heap per active key, a million voters in the
// per-voter limiter (run with -benchtime 1x).
func BenchmarkLimiterMemory(b *testing.B) {
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		l := newLimiter(2, 10)
		now := time.Now()
		for i := range 1_000_000 {
			l.reserve(fmt.Sprintf("%032x", i), 1, now)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "heap-bytes/key")
		runtime.KeepAlive(l)
	}
}
