package certify

import (
	"sync"
	"time"
)

// pendingLog decides when a pending certification is worth a log line:
// when its reason changes, and otherwise with back-off (first again after
// a minute, then every 2, 4 … at most 30 minutes). The metric
// (tally_certify_attempts_total) and GET …/result carry every attempt.
type pendingLog struct {
	mu    sync.Mutex
	polls map[string]pendingEntry
}

type pendingEntry struct {
	reason string
	next   time.Time     // when the same reason is logged again
	every  time.Duration // the back-off after next
}

const (
	pendingFirstRepeat = time.Minute
	pendingMaxRepeat   = 30 * time.Minute
)

// should reports whether to log poll's pending reason at now, and
// records that it was.
func (l *pendingLog) should(poll, reason string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.polls == nil {
		l.polls = map[string]pendingEntry{}
	}
	e, ok := l.polls[poll]
	switch {
	case !ok || e.reason != reason:
		l.polls[poll] = pendingEntry{reason: reason, next: now.Add(pendingFirstRepeat), every: 2 * pendingFirstRepeat}
		return true
	case now.Before(e.next):
		return false
	}
	l.polls[poll] = pendingEntry{reason: reason, next: now.Add(e.every), every: min(2*e.every, pendingMaxRepeat)}
	return true
}

// forget drops a poll once it is certified.
func (l *pendingLog) forget(poll string) {
	l.mu.Lock()
	delete(l.polls, poll)
	l.mu.Unlock()
}
