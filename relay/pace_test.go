package relay

import (
	"testing"
	"time"
)

// The window follows the measured reply time between its bounds: the
// least before any reply, about the replies' time after, the most once
// replies are slower than it.
func TestPaceFollowsReplyTimes(t *testing.T) {
	var p pace
	if got := p.window(2*time.Millisecond, 20*time.Millisecond); got != 2*time.Millisecond {
		t.Fatalf("window before any reply: %v, want the least", got)
	}
	for range 50 {
		p.observe(5 * time.Millisecond)
	}
	if got := p.window(2*time.Millisecond, 20*time.Millisecond); got < 4*time.Millisecond || got > 6*time.Millisecond {
		t.Fatalf("window after 5 ms replies: %v", got)
	}
	for range 50 {
		p.observe(150 * time.Millisecond)
	}
	if got := p.window(2*time.Millisecond, 20*time.Millisecond); got != 20*time.Millisecond {
		t.Fatalf("window after 150 ms replies: %v, want the most", got)
	}
	for range 80 {
		p.observe(time.Millisecond)
	}
	if got := p.window(2*time.Millisecond, 20*time.Millisecond); got != 2*time.Millisecond {
		t.Fatalf("window after 1 ms replies: %v, want the least", got)
	}
}
