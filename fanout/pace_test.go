package fanout

import (
	"testing"
	"time"
)

// The tick stretches by half a step while the process uses more cores
// than its budget, up to the maximum, holds between 70% and 100% of it,
// and shrinks back to --tick when the load falls.
func TestPacerStretchesTheTickUnderLoadAndShrinksItBack(t *testing.T) {
	var used time.Duration
	p := newPacer(250*time.Millisecond, time.Second, 1.0, func() time.Duration { return used }, nil)
	now := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	second := func(cores float64) time.Duration {
		used += time.Duration(cores * float64(time.Second))
		now = now.Add(time.Second)
		p.step(now)
		return p.tick()
	}
	p.step(now) // the first reading: nothing to compare with
	if got := p.tick(); got != 250*time.Millisecond {
		t.Fatalf("at rest: %v", got)
	}
	want := []time.Duration{375 * time.Millisecond, 562500 * time.Microsecond, 843750 * time.Microsecond, time.Second, time.Second}
	for i, w := range want {
		if got := second(1.8); got != w {
			t.Fatalf("busy second %d: tick %v, want %v", i+1, got, w)
		}
	}
	if got := second(0.8); got != time.Second { // within the band: held
		t.Fatalf("at 80%% of the budget: %v", got)
	}
	for range 5 {
		second(0.1)
	}
	if got := p.tick(); got != 250*time.Millisecond {
		t.Fatalf("after the load: %v, want --tick back", got)
	}
}

// Without a CPU reading or a budget the tick never moves.
func TestPacerOffStaysAtTheTick(t *testing.T) {
	for _, p := range []*pacer{newPacer(250*time.Millisecond, time.Second, 0, func() time.Duration { return time.Hour }, nil), newPacer(250*time.Millisecond, time.Second, 1, nil, nil)} {
		p.step(time.Now())
		p.step(time.Now().Add(time.Second))
		if p.tick() != 250*time.Millisecond {
			t.Fatalf("tick moved: %v", p.tick())
		}
	}
}

// Frames say the tick they were sent at, stretched or not.
func TestFramesSayTheirTick(t *testing.T) {
	st := newState(t)
	s := newServer(t, st, func(c *Config) { c.Tick = time.Hour }) // no tick of its own during the test
	fs := &fakeSender{}
	if _, err := s.join("p", "ip", "test", fs); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return len(fs.got()) == 1 })
	if !contains(fs.got()[0], `"tick_ms":3600000`) {
		t.Fatalf("snapshot: %s", fs.got()[0])
	}
}

// The tick stretches while the goroutines wait for a core past
// ContendedWait, whatever the process's own CPU use (another process has
// the cores), holds between half of it and it, and shrinks back once the
// wait is short again.
func TestPacerStretchesWhileTheCoresAreTaken(t *testing.T) {
	var used, wait time.Duration
	p := newPacer(250*time.Millisecond, time.Second, 1.0, func() time.Duration { return used }, func() time.Duration { return wait })
	now := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	second := func(cores float64, w time.Duration) time.Duration {
		used += time.Duration(cores * float64(time.Second))
		wait = w
		now = now.Add(time.Second)
		p.step(now)
		return p.tick()
	}
	p.step(now)
	if got := second(0.2, 30*time.Millisecond); got != 375*time.Millisecond {
		t.Fatalf("cores taken at 0.2 of the budget: tick %v, want stretched to 375ms", got)
	}
	if got := second(0.2, ContendedWait*3/4); got != 375*time.Millisecond {
		t.Fatalf("a wait between half and all of ContendedWait: %v, want held", got)
	}
	if got := second(0.2, time.Millisecond); got != 250*time.Millisecond {
		t.Fatalf("a short wait again: %v, want back to --tick", got)
	}
	if got := time.Duration(p.lastWait.Load()); got != time.Millisecond {
		t.Fatalf("last wait %v, want the last reading", got)
	}
}
