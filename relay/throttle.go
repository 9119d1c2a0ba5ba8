package relay

import (
	"sync"
	"time"
)

// throttle lets a repeated warning through once per interval and counts
// the ones it held back, so a flood of bad batches or a region without
// full nodes writes a line every few seconds, not one per batch.
type throttle struct {
	every   time.Duration
	mu      sync.Mutex
	last    time.Time
	dropped int
}

// allow reports whether to log at now, and how many were held back since
// the last line.
func (t *throttle) allow(now time.Time) (ok bool, suppressed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.last.IsZero() && now.Sub(t.last) < t.every {
		t.dropped++
		return false, 0
	}
	t.last, suppressed, t.dropped = now, t.dropped, 0
	return true, suppressed
}
