package relay

import (
	"testing"
	"time"
)

// The window follows the measured reply time between its bounds; the
// attempt timeout is the configured ceiling until a reply was measured,
// then the smoothed time plus four deviations, never under MinAttempt.
func TestPaceFollowsReplyTimes(t *testing.T) {
	var p pace
	if got := p.attempt(700 * time.Millisecond); got != 700*time.Millisecond {
		t.Fatalf("attempt before any reply: %v, want the ceiling", got)
	}
	if got := p.window(2*time.Millisecond, 20*time.Millisecond); got != 2*time.Millisecond {
		t.Fatalf("window before any reply: %v, want the least", got)
	}
	for range 50 {
		p.observe(5 * time.Millisecond)
	}
	if got := p.window(2*time.Millisecond, 20*time.Millisecond); got < 4*time.Millisecond || got > 6*time.Millisecond {
		t.Fatalf("window after 5 ms replies: %v", got)
	}
	if got := p.attempt(700 * time.Millisecond); got != MinAttempt {
		t.Fatalf("attempt after steady 5 ms replies: %v, want MinAttempt", got)
	}
	// A full node slowing down: the window stops at its ceiling, the
	// attempt grows to cover the slower replies, up to its own.
	for range 50 {
		p.observe(150 * time.Millisecond)
	}
	if got := p.window(2*time.Millisecond, 20*time.Millisecond); got != 20*time.Millisecond {
		t.Fatalf("window after 150 ms replies: %v, want the ceiling", got)
	}
	if got := p.attempt(700 * time.Millisecond); got < 150*time.Millisecond || got > 700*time.Millisecond {
		t.Fatalf("attempt after 150 ms replies: %v", got)
	}
	for range 20 {
		p.observe(3 * time.Second) // a stall
	}
	if got := p.attempt(700 * time.Millisecond); got != 700*time.Millisecond {
		t.Fatalf("attempt after stalls: %v, want the ceiling", got)
	}
}

// Replies slower than the timeout raise it (each timeout doubles it, up
// to the ceiling) instead of sending every batch twice; the next answer
// brings it back to the measured one.
func TestPaceBacksOffAfterTimeouts(t *testing.T) {
	var p pace
	for range 30 {
		p.observe(5 * time.Millisecond)
	}
	p.timedOut(700 * time.Millisecond)
	if got := p.attempt(700 * time.Millisecond); got != 2*MinAttempt {
		t.Fatalf("after a timeout: %v, want %v", got, 2*MinAttempt)
	}
	p.timedOut(700 * time.Millisecond)
	p.timedOut(700 * time.Millisecond)
	if got := p.attempt(700 * time.Millisecond); got != 700*time.Millisecond {
		t.Fatalf("after three timeouts: %v, want the ceiling", got)
	}
	for range 30 {
		p.observe(300 * time.Millisecond) // the slower replies, now answered in time
	}
	if got := p.attempt(700 * time.Millisecond); got < 300*time.Millisecond {
		t.Fatalf("after 300 ms replies: %v, want above them", got)
	}
}
