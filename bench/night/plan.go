package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// shape is the broadcast's vote rate over time: silence, a ramp to the
// peak, the peak held for a burst, then a tail decaying toward zero.
type shape struct {
	silence, ramp, burst, length time.Duration // length: ramp + burst + tail
	tau                          float64       // tail decay, seconds
}

var broadcast = shape{silence: 2 * time.Second, ramp: 5 * time.Second, burst: 4 * time.Second, length: 30 * time.Second, tau: 5}

// weight is the relative rate at t after the silence (peak = 1).
func (s shape) weight(t float64) float64 {
	ramp, burst := s.ramp.Seconds(), s.burst.Seconds()
	switch {
	case t < ramp:
		return t / ramp
	case t < ramp+burst:
		return 1
	default:
		return math.Exp(-(t - ramp - burst) / s.tau)
	}
}

// phase names the part of the shape t (after the silence) falls in.
func (s shape) phase(t time.Duration) int {
	switch {
	case t < s.ramp:
		return phaseRamp
	case t < s.ramp+s.burst:
		return phasePeak
	default:
		return phaseTail
	}
}

const (
	phaseRamp = iota
	phasePeak
	phaseTail
	phases
)

var phaseNames = [phases]string{"ramp", "peak", "tail"}

// times returns n send times (after the silence) spread by the shape,
// and the peak rate that gives: n slots over length.
func (s shape) times(n int) ([]time.Duration, float64) {
	const step = 0.001
	var area float64
	for t := 0.0; t < s.length.Seconds(); t += step {
		area += s.weight(t) * step
	}
	peak := float64(n) / area
	out := make([]time.Duration, 0, n)
	var acc float64
	for t := 0.0; t < s.length.Seconds() && len(out) < n; t += step {
		acc += s.weight(t) * step * peak
		for acc >= 1 && len(out) < n {
			out = append(out, time.Duration(t*float64(time.Second)))
			acc--
		}
	}
	for len(out) < n {
		out = append(out, s.length)
	}
	return out, peak
}

// send is one planned request.
type send struct {
	at     time.Duration // after the silence
	voter  int32
	vote   int32 // index into the voter's votes (0: first; 1: change of mind)
	region int8
	retry  bool // the same request again (same key), after its ack
}

// plan lays out the night: votes first votes and changes of mind (10%),
// plus 2% retries; each voter at its home region, crossing for 3% of its
// requests and a third of the retries.
type plan struct {
	sends   []send
	voters  int
	options [][2]uint8 // per voter: option of its first vote and of its change
	changes []bool     // per voter: changes its mind
	peak    float64    // planned peak votes/s
}

func makePlan(votes, regions int, rng *rand.Rand) *plan {
	at, peak := broadcast.times(votes)
	p := &plan{peak: peak}
	type waiting struct {
		voter int32
		ready time.Duration
	}
	var queue []waiting // voters who will change their mind, and from when
	changes := 0
	for i, t := range at {
		if len(queue) > 0 && queue[0].ready <= t && changes*10 < i {
			w := queue[0]
			queue = queue[1:]
			changes++
			p.sends = append(p.sends, send{at: t, voter: w.voter, vote: 1, region: p.regionOf(w.voter, regions, rng)})
			continue
		}
		v := int32(p.voters)
		p.voters++
		p.options = append(p.options, [2]uint8{uint8(rng.IntN(4)), uint8(rng.IntN(4))})
		change := rng.IntN(10) == 0
		p.changes = append(p.changes, change)
		if change {
			queue = append(queue, waiting{v, t + time.Second + time.Duration(rng.IntN(3000))*time.Millisecond})
			slices.SortFunc(queue, func(a, b waiting) int { return int(a.ready - b.ready) })
		}
		p.sends = append(p.sends, send{at: t, voter: v, region: p.regionOf(v, regions, rng)})
	}
	// Retries: 2% of requests, sent again with the same key 0.4-2 s later
	// (a client that lost the ack); a third of them at another region.
	n := len(p.sends)
	for i := range n / 50 {
		orig := p.sends[rng.IntN(n)]
		r := orig
		r.retry = true
		r.at = orig.at + time.Duration(400+rng.IntN(1600))*time.Millisecond
		if i%3 == 0 {
			r.region = int8((int(orig.region) + 1 + rng.IntN(regions-1)) % regions)
		}
		p.sends = append(p.sends, r)
	}
	slices.SortStableFunc(p.sends, func(a, b send) int { return int(a.at - b.at) })
	return p
}

// regionOf is the voter's home region, or another one for 3% of requests.
func (p *plan) regionOf(v int32, regions int, rng *rand.Rand) int8 {
	home := int(v) % regions
	if rng.IntN(100) < 3 {
		return int8((home + 1 + rng.IntN(regions-1)) % regions)
	}
	return int8(home)
}
