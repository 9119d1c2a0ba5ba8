package poll

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// Spec is what a host sends to create a poll: the definition with the
// optional parts optional. Exactly one of ClosesAt and DurationS may be set;
// with neither the poll runs DefaultDuration.
type Spec struct {
	ID        string   `json:"id,omitempty"`
	Question  string   `json:"question"`
	Options   []Option `json:"options"`
	OpensAt   *int64   `json:"opens_at,omitempty"`   // Unix ms; default now
	ClosesAt  *int64   `json:"closes_at,omitempty"`  // Unix ms
	DurationS *float64 `json:"duration_s,omitempty"` // seconds from opens_at
	GraceS    *float64 `json:"grace_s,omitempty"`    // default 2 s
	Public    bool     `json:"public,omitempty"`     // votes need a token earned with the puzzle
	Limits    *Limits  `json:"limits,omitempty"`     // this poll's own rate limits
	Hidden    bool     `json:"hidden,omitempty"`     // no counts shown until revealed
	Event     string   `json:"event,omitempty"`      // the show this poll belongs to
	// Quiz makes the poll a quiz question (docs/quiz.md); its grace is 0.
	Quiz *QuizQuestion `json:"quiz,omitempty"`
}

// DefaultDuration is how long a poll runs when the spec says nothing.
const DefaultDuration = 60 * time.Second

// Definition fills in the defaults at wall time nowMs and validates.
func (s Spec) Definition(nowMs int64) (Definition, error) {
	d := Definition{ID: s.ID, Question: s.Question, Options: s.Options, OpensAt: nowMs, GraceMs: DefaultGrace.Milliseconds(),
		Public: s.Public, Limits: s.Limits, Hidden: s.Hidden, Event: s.Event, Quiz: s.Quiz}
	if d.ID == "" {
		d.ID = newID()
	}
	if s.OpensAt != nil {
		d.OpensAt = *s.OpensAt
		// Checked before any arithmetic on it: a poll is scheduled at most
		// MaxLead ahead, and opens_at in the past may be at most one
		// MaxDuration back (the longest poll still open now).
		if d.OpensAt > AddMs(nowMs, MaxLead.Milliseconds()) || d.OpensAt < AddMs(nowMs, -MaxDuration.Milliseconds()) {
			return d, fmt.Errorf("%w: opens_at must be within %v before and %v after now (%s)", ErrInvalid, MaxDuration, MaxLead, msTime(nowMs))
		}
	}
	switch {
	case s.ClosesAt != nil && s.DurationS != nil:
		return d, fmt.Errorf("%w: give closes_at or duration_s, not both", ErrInvalid)
	case s.ClosesAt != nil:
		d.ClosesAt = *s.ClosesAt
		if d.ClosesAt <= nowMs {
			return d, fmt.Errorf("%w: closes_at is not in the future (now is %s)", ErrInvalid, msTime(nowMs))
		}
	case s.DurationS != nil:
		if !(*s.DurationS >= 0.001 && *s.DurationS <= MaxDuration.Seconds()) { // NaN fails too
			return d, fmt.Errorf("%w: duration_s must be 0.001-%v", ErrInvalid, MaxDuration.Seconds())
		}
		d.ClosesAt = AddMs(d.OpensAt, int64(*s.DurationS*1000))
	case s.Quiz != nil && s.Quiz.LimitMs > 0 && s.Quiz.LimitMs <= MaxDuration.Milliseconds():
		d.ClosesAt = AddMs(d.OpensAt, s.Quiz.LimitMs) // a question closes at its time limit
	default:
		d.ClosesAt = AddMs(d.OpensAt, DefaultDuration.Milliseconds())
	}
	if s.Quiz != nil {
		d.GraceMs = 0 // an answer after the close is too late; a grace_s above 0 is refused
		q := *s.Quiz
		q.Started = true // a question created as a poll runs on its own schedule
		d.Quiz = &q
	}
	if s.GraceS != nil {
		if !(*s.GraceS >= 0 && *s.GraceS <= MaxGrace.Seconds()) {
			return d, fmt.Errorf("%w: grace_s must be 0-%v", ErrInvalid, MaxGrace.Seconds())
		}
		d.GraceMs = int64(*s.GraceS * 1000)
	}
	return d, d.Validate()
}

func newID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "p-" + hex.EncodeToString(b)
}
