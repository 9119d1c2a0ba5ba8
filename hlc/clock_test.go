package hlc

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// manualTime is a settable physical clock for tests.
type manualTime struct{ ms atomic.Int64 }

func (m *manualTime) now() time.Time { return time.UnixMilli(m.ms.Load()) }
func (m *manualTime) set(ms int64)   { m.ms.Store(ms) }
func newManual(ms int64) *manualTime { m := &manualTime{}; m.set(ms); return m }

func mustNew(t *testing.T, cfg Config) *Clock {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustNow(t *testing.T, c *Clock) Timestamp {
	t.Helper()
	ts, err := c.Now()
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestNowFollowsPhysicalTimeAndNeverGoesBack(t *testing.T) {
	m := newManual(1000)
	c := mustNew(t, Config{Replica: "a", Now: m.now})

	steps := []struct {
		phys int64
		want Timestamp
	}{
		{1000, Timestamp{1000, 0, "a"}},
		{1000, Timestamp{1000, 1, "a"}},
		{1005, Timestamp{1005, 0, "a"}},
		{900, Timestamp{1005, 1, "a"}}, // wall clock stepped back
		{1005, Timestamp{1005, 2, "a"}},
		{1006, Timestamp{1006, 0, "a"}},
	}
	for i, s := range steps {
		m.set(s.phys)
		if got := mustNow(t, c); got != s.want {
			t.Fatalf("step %d: got %v, want %v", i, got, s.want)
		}
	}
}

func TestUpdateOrdersAfterRemote(t *testing.T) {
	m := newManual(1000)
	c := mustNew(t, Config{Replica: "a", Now: m.now, MaxSkew: 5 * time.Second})
	remote := Timestamp{Wall: 3000, Logical: 7, Replica: "b"}
	if err := c.Update(remote); err != nil {
		t.Fatal(err)
	}
	got := mustNow(t, c)
	if !remote.Less(got) {
		t.Fatalf("Now() = %v, not after remote %v", got, remote)
	}
	if got.Wall != 3000 || got.Logical != 9 {
		t.Fatalf("Now() = %v, want 3000.9", got)
	}
}

func TestUpdateRefusesSkew(t *testing.T) {
	m := newManual(10_000)
	c := mustNew(t, Config{Replica: "a", Now: m.now, MaxSkew: 5 * time.Second})
	before := c.Last()
	err := c.Update(Timestamp{Wall: 10_000 + 5001, Replica: "b"})
	if !errors.Is(err, ErrSkew) {
		t.Fatalf("err = %v, want ErrSkew", err)
	}
	if c.Refused() != 1 {
		t.Fatalf("Refused() = %d, want 1", c.Refused())
	}
	if c.Last() != before {
		t.Fatalf("refused timestamp was adopted: %v", c.Last())
	}
	// Exactly at the bound is accepted.
	if err := c.Update(Timestamp{Wall: 15_000, Replica: "b"}); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
}

func TestNowIsStrictlyMonotonicUnderConcurrency(t *testing.T) {
	c := mustNew(t, Config{Replica: "a"})
	const goroutines, per = 8, 5000
	out := make([][]Timestamp, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				ts, err := c.Now()
				if err != nil {
					t.Error(err)
					return
				}
				out[g] = append(out[g], ts)
			}
		}()
	}
	wg.Wait()
	seen := make(map[Timestamp]bool, goroutines*per)
	for _, list := range out {
		for i, ts := range list {
			if i > 0 && !list[i-1].Less(ts) {
				t.Fatalf("not increasing within a goroutine: %v then %v", list[i-1], ts)
			}
			if seen[ts] {
				t.Fatalf("timestamp %v issued twice", ts)
			}
			seen[ts] = true
		}
	}
}

func TestRestartResumesAboveHighWaterMark(t *testing.T) {
	store := FileStore{Path: filepath.Join(t.TempDir(), "hlc")}
	m := newManual(50_000)
	c := mustNew(t, Config{Replica: "a", Now: m.now, Store: store, Window: time.Second})
	var last Timestamp
	for i := range 100 {
		m.set(50_000 + int64(i)*30)
		last = mustNow(t, c)
	}

	// The process restarts on a machine whose clock went back 30 s: it
	// resumes above the mark.
	m.set(50_000 - 30_000)
	c2 := mustNew(t, Config{Replica: "a", Now: m.now, Store: store, Window: time.Second})
	if got := mustNow(t, c2); !last.Less(got) {
		t.Fatalf("after restart Now() = %v, not after %v", got, last)
	}
	// Back an hour (or a mark damaged into the future): resuming above it
	// would stamp every vote an hour ahead, so it refuses.
	m.set(50_000 - 3_600_000)
	if _, err := New(Config{Replica: "a", Now: m.now, Store: store, Window: time.Second}); !errors.Is(err, ErrMarkAhead) {
		t.Fatalf("a mark an hour ahead: %v, want ErrMarkAhead", err)
	}
}

func TestFileStoreRejectsGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hlc")
	if err := (FileStore{Path: path}).Save(42); err != nil {
		t.Fatal(err)
	}
	if v, err := (FileStore{Path: path}).Load(); err != nil || v != 42 {
		t.Fatalf("Load() = %d, %v", v, err)
	}
	if err := writeFile(path, "not a number"); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Store: FileStore{Path: path}}); !errors.Is(err, ErrStore) {
		t.Fatalf("New with garbage store: %v, want ErrStore", err)
	}
}

func TestParseRoundTrip(t *testing.T) {
	for _, ts := range []Timestamp{{}, {1, 2, ""}, {1733000000000, 42, "eu-1"}} {
		got, err := Parse(ts.String())
		if err != nil || got != ts {
			t.Fatalf("Parse(%q) = %v, %v", ts.String(), got, err)
		}
	}
	for _, bad := range []string{"", "12", "a.b", "-1.0", "1.99999999999", "1.-1@x"} {
		if _, err := Parse(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) err = %v, want ErrMalformed", bad, err)
		}
	}
}

// A remote timestamp at the edges of its fields never makes the clock go
// back or wrap: a logical counter at its maximum steps the wall, and a
// hostile wall time far in the past or future is either absorbed or
// refused.
func TestUpdateAtTheEdges(t *testing.T) {
	m := newManual(1_000_000)
	c := mustNew(t, Config{Replica: "a", Now: m.now})
	before := mustNow(t, c)
	remote := Timestamp{Wall: 1_000_000, Logical: math.MaxUint32, Replica: "b"}
	if err := c.Update(remote); err != nil {
		t.Fatal(err)
	}
	if got := mustNow(t, c); !remote.Less(got) || !before.Less(got) {
		t.Fatalf("after a remote at the logical maximum, Now() = %v (remote %v)", got, remote)
	}
	for _, wall := range []int64{math.MinInt64, -1, 0} {
		prev := c.Last()
		if err := c.Update(Timestamp{Wall: wall, Logical: math.MaxUint32}); err != nil {
			t.Fatalf("a remote in the past (%d) refused: %v", wall, err)
		}
		if got := mustNow(t, c); !prev.Less(got) {
			t.Fatalf("went back after a remote at %d: %v then %v", wall, prev, got)
		}
	}
	if err := c.Update(Timestamp{Wall: math.MaxInt64}); !errors.Is(err, ErrSkew) {
		t.Fatalf("a remote at the end of time: %v", err)
	}
}

// After a crash the clock resumes from its mark, ahead of physical time by
// at most a Window; WaitOutMark waits that out on the process's timer, and
// a clean Close leaves nothing to wait.
func TestWaitOutMarkAfterCrashNotAfterClose(t *testing.T) {
	store := FileStore{Path: filepath.Join(t.TempDir(), "hlc")}
	c := mustNew(t, Config{Replica: "a", Store: store, Window: 300 * time.Millisecond})
	last := mustNow(t, c)
	// Crash: no Close. The restart resumes at the mark, ahead of the wall.
	c2 := mustNew(t, Config{Replica: "a", Store: store, Window: 300 * time.Millisecond})
	if a := c2.Ahead(); a <= 0 || a > 300*time.Millisecond {
		t.Fatalf("ahead after a crash: %v", a)
	}
	if _, err := c2.WaitOutMark(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts := mustNow(t, c2)
	if !last.Less(ts) || ts.Wall > time.Now().UnixMilli() {
		t.Fatalf("after waiting: %v (last %v, wall %d)", ts, last, time.Now().UnixMilli())
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	c3 := mustNew(t, Config{Replica: "a", Store: store, Window: 300 * time.Millisecond})
	if a := c3.Ahead(); a > 2*time.Millisecond {
		t.Fatalf("ahead after a clean close: %v", a)
	}
	if got := mustNow(t, c3); !ts.Less(got) {
		t.Fatalf("after a clean restart: %v, not after %v", got, ts)
	}
	// A physical clock behind the mark (within MaxMarkAhead) waits one
	// Window, not until the mark.
	m := newManual(time.Now().UnixMilli() - 30_000)
	c4 := mustNew(t, Config{Replica: "a", Now: m.now, Store: store, Window: 50 * time.Millisecond})
	if d, err := c4.WaitOutMark(context.Background()); err != nil || d != 50*time.Millisecond {
		t.Fatalf("wait with the clock gone back: %v %v", d, err)
	}
}

// NowAfter stamps after the floor it is given without moving the clock:
// a voter's change of mind orders after the vote a region whose clock
// runs ahead stamped, and nobody else's stamps move with it.
func TestNowAfterOrdersAfterTheFloorWithoutAdoptingIt(t *testing.T) {
	m := newManual(1000)
	c := mustNew(t, Config{Replica: "a", Now: m.now, MaxSkew: 50 * time.Millisecond})
	cases := []struct {
		name  string
		floor Timestamp
		want  Timestamp
	}{
		{"no floor", Timestamp{}, Timestamp{1000, 0, "a"}},
		{"floor behind", Timestamp{Wall: 990, Logical: 7}, Timestamp{1000, 1, "a"}},
		{"floor in the same millisecond", Timestamp{Wall: 1000, Logical: 9}, Timestamp{1000, 10, "a"}},
		{"floor ahead within the bound", Timestamp{Wall: 1040, Logical: 3}, Timestamp{1040, 4, "a"}},
		{"floor at the logical maximum", Timestamp{Wall: 1041, Logical: math.MaxUint32}, Timestamp{1042, 0, "a"}},
	}
	for _, tc := range cases {
		got, err := c.NowAfter(tc.floor)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Fatalf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	// The clock itself did not follow the floors ahead of it, but it knows
	// what it issued.
	if got := mustNow(t, c); got.Wall != 1000 {
		t.Fatalf("the clock moved to %v with the floors", got)
	}
	if got := c.Issued(); got != 1042 {
		t.Fatalf("Issued() = %d, want 1042 (the newest stamp NowAfter gave)", got)
	}
	if _, err := c.NowAfter(Timestamp{Wall: 1051}); !errors.Is(err, ErrSkew) {
		t.Fatalf("a floor 51 ms ahead (bound 50 ms): err %v, want ErrSkew", err)
	}
	if got := mustNow(t, c); got.Wall != 1000 {
		t.Fatalf("a refused floor moved the clock to %v", got)
	}
}
