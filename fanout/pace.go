package fanout

import (
	"sync"
	"sync/atomic"
	"time"
)

// pacer sets the hubs' tick: --tick while the node has CPU to spare, up to
// --max-tick while its CPU use is over the budget or its goroutines wait
// for a core (the machine's cores are taken, by this process or another),
// so under a crowd the fan-out sends fewer, fresher-than-two-seconds
// frames instead of falling behind and taking the vote path's cores. It
// measures the whole process (the fan-out's writes run on many goroutines;
// the process is what the vote path shares), once a second.
type pacer struct {
	min, max time.Duration
	budget   float64              // cores the node may use before the tick stretches
	cpu      func() time.Duration // the process's CPU time so far
	wait     func() time.Duration // the goroutines' wait for a core since the last call, p99; nil: not watched
	cur      atomic.Int64         // the tick now, ns
	lastWait atomic.Int64         // the last wait read, ns

	mu      sync.Mutex
	lastCPU time.Duration
	lastAt  time.Time
}

// Steps of the tick: stretch by half over the budget, shrink back by a
// third under 70% of it, so it neither oscillates nor lags a falling load
// by more than a few seconds.
const (
	stretch = 1.5
	relax   = 0.7
)

// ContendedWait is the goroutines' wait for a core (p99 over a second)
// past which the tick stretches whatever the process's own CPU use: the
// vote path's requests are queueing for cores. Under half of it the tick
// may shrink back.
const ContendedWait = 10 * time.Millisecond

func newPacer(tick, maxTick time.Duration, budget float64, cpu, wait func() time.Duration) *pacer {
	p := &pacer{min: tick, max: max(maxTick, tick), budget: budget, cpu: cpu, wait: wait}
	p.cur.Store(int64(tick))
	return p
}

// tick is the tick now.
func (p *pacer) tick() time.Duration { return time.Duration(p.cur.Load()) }

// step reads the CPU used since the last step and moves the tick; it
// returns the cores used over the interval (0 on the first call).
func (p *pacer) step(now time.Time) float64 {
	if p.cpu == nil || p.budget <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	used := p.cpu()
	prevCPU, prevAt := p.lastCPU, p.lastAt
	p.lastCPU, p.lastAt = used, now
	wall := now.Sub(prevAt)
	if prevAt.IsZero() || wall <= 0 {
		return 0
	}
	cores := float64(used-prevCPU) / float64(wall)
	var wait time.Duration
	if p.wait != nil {
		wait = p.wait()
		p.lastWait.Store(int64(wait))
	}
	t := p.tick()
	switch {
	case cores > p.budget, wait > ContendedWait:
		t = min(time.Duration(float64(t)*stretch), p.max)
	case cores < relax*p.budget && wait < ContendedWait/2:
		t = max(time.Duration(float64(t)/stretch), p.min)
	}
	p.cur.Store(int64(t))
	return cores
}
