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
	p := newPacer(250*time.Millisecond, time.Second, 1.0, func() time.Duration { return used })
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
	for _, p := range []*pacer{newPacer(250*time.Millisecond, time.Second, 0, func() time.Duration { return time.Hour }), newPacer(250*time.Millisecond, time.Second, 1, nil)} {
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
