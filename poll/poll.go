package poll

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"tally/hlc"
	"tally/ids"
	"tally/quiz"
)

// Errors returned by validation. They wrap ErrInvalid, so callers can map
// every one of them to one "invalid request" answer.
var (
	ErrInvalid  = errors.New("poll: invalid definition")
	ErrNotFound = errors.New("poll: not found")
)

// Limits on a definition.
const (
	MinOptions     = 2
	MaxOptions     = 32
	MaxIDLen       = ids.MaxLen
	MaxQuestionLen = 300
	MaxLabelLen    = 120
	MaxDuration    = 7 * 24 * time.Hour
	MaxGrace       = 5 * time.Minute
	DefaultGrace   = 2 * time.Second
	// MaxLead is how far ahead a poll may be scheduled when it is created.
	MaxLead = 30 * 24 * time.Hour
	// MinRate and MaxRate bound a poll's own rate limits (votes per
	// second): at the floor a limited client waits at most 100 s.
	MinRate = 0.01
	MaxRate = 1e6
)

// MinTime and MaxTime bound every time in a definition (Unix ms,
// 2000-01-01 and 2200-01-01 UTC), so window arithmetic cannot overflow.
const (
	MinTime int64 = 946_684_800_000
	MaxTime int64 = 7_258_118_400_000
)

// AddMs returns a+b, saturating at the int64 range instead of wrapping:
// window ends computed with it never overflow whatever a peer sent.
func AddMs(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

// Option is one answer a voter can pick.
type Option struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// Definition is a poll as replicated between regions. Times are Unix
// milliseconds (the wall part of the hybrid logical clock).
type Definition struct {
	ID       string   `json:"id"`
	Question string   `json:"question"`
	Options  []Option `json:"options"`
	OpensAt  int64    `json:"opens_at"`
	ClosesAt int64    `json:"closes_at"`
	GraceMs  int64    `json:"grace_ms"`
	// Public polls take votes only with a voter token earned by solving
	// the proof-of-work puzzle.
	Public bool `json:"public,omitempty"`
	// Limits override the node's vote rate limits for this poll.
	Limits *Limits `json:"limits,omitempty"`
	// Hidden polls show no counts to viewers (API, streams, page) until
	// the host reveals them; votes count all the same.
	Hidden bool `json:"hidden,omitempty"`
	// Event groups the polls of one show (an id like a poll's).
	Event string `json:"event,omitempty"`
	// Quiz makes the poll one question of a quiz (docs/quiz.md); nil for
	// a poll.
	Quiz *QuizQuestion `json:"quiz,omitempty"`
	// CloseStamp is the hybrid logical time of the write that last set
	// the schedule, OpensAt and ClosesAt (a close, an extend, a quiz
	// question's start); nil: the definition's own write (its creation). Versions of a definition amended at two regions at once
	// are joined field by field (state.PutPoll): the close written last
	// wins even when a reveal elsewhere is newer. Not shown by the API.
	CloseStamp *hlc.Timestamp `json:"close_stamp,omitempty"`
}

// QuizQuestion is what makes a poll a quiz question: each participant's
// first answer counts, it is scored by the time the serving node measured
// (package quiz), and there is no grace: an answer after the close is too
// late. Correct is shown to participants only once the question is
// revealed.
type QuizQuestion struct {
	Quiz    string   `json:"quiz"`
	Title   string   `json:"title,omitempty"` // the quiz's title
	Index   int      `json:"index"`           // from 0
	Correct []string `json:"correct"`
	Points  int64    `json:"points"`
	LimitMs int64    `json:"limit_ms"`
	// Started is set when the host starts the question (or ends the quiz
	// before it): until then the question is parked, seen only by the
	// host, and its OpensAt and ClosesAt are placeholders. It is part of
	// the schedule and merges with it (state.PutPoll). The question's
	// reveal is its Definition.Hidden going false, as for any poll.
	Started bool `json:"started"`
	// Skipped is set on a question the host never started when the quiz
	// ended: it is closed, unanswered, and stays unseen by everyone but
	// the host (Withheld), like a parked one. It merges with Started.
	Skipped bool `json:"skipped,omitempty"`
	// legacy is set by UnmarshalJSON for a question written before
	// Started existed; Definition.Upgrade resolves it.
	legacy bool
}

// UnmarshalJSON decodes a quiz question strictly (an unknown field is an
// error, as everywhere between nodes) and notes one written before the
// "started" field existed.
func (q *QuizQuestion) UnmarshalJSON(b []byte) error {
	type plain QuizQuestion
	var p struct {
		plain
		Started *bool `json:"started"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("%w: data after the quiz question", ErrInvalid)
	}
	*q = QuizQuestion(p.plain)
	q.Started, q.legacy = p.Started != nil && *p.Started, p.Started == nil
	return nil
}

// legacyParkLead is how far ahead of its write the versions before
// QuizQuestion.Started parked a question (29 days): one that far ahead
// was parked, one not was started.
const legacyParkLead = 29 * 24 * time.Hour

// Upgrade resolves a quiz question written before Started existed (by a
// node of an earlier version, or in a data dir it left): such a version
// parked a question by opening it 29 days after the write that set its
// schedule, so one opening that far ahead is parked and any other was
// started. The state calls it on every definition it takes.
func (d *Definition) Upgrade() {
	if d.Quiz == nil || !d.Quiz.legacy {
		return
	}
	q := *d.Quiz
	q.legacy = false
	q.Started = d.CloseStamp == nil || d.OpensAt-d.CloseStamp.Wall < legacyParkLead.Milliseconds()-3_600_000
	d.Quiz = &q
}

// Limits are a poll's own vote rate limits (votes per second, with a burst
// of twice that, at least one); zero fields keep the node's.
type Limits struct {
	IPRate    float64 `json:"ip_rate,omitempty"`
	VoterRate float64 `json:"voter_rate,omitempty"`
}

// Status is where a poll is in its lifecycle.
type Status string

// The statuses, in lifecycle order.
const (
	Scheduled  Status = "scheduled"
	Open       Status = "open"
	Closed     Status = "closed"
	Reconciled Status = "reconciled"
)

// Window says how a vote stamped at a given time relates to the poll.
type Window int

// The windows a vote can fall in.
const (
	BeforeOpen Window = iota // refused: poll_not_open
	InWindow                 // counted
	InGrace                  // ledgered as late, not counted
	AfterGrace               // refused: poll_closed
)

// StatusAt returns the status at wall time nowMs.
func (d *Definition) StatusAt(nowMs int64, reconciled bool) Status {
	switch {
	case reconciled:
		return Reconciled
	case d.Parked() || nowMs < d.OpensAt:
		return Scheduled
	case nowMs < d.ClosesAt:
		return Open
	}
	return Closed
}

// WindowAt places a vote stamped at wall time ms. The close is exclusive: a
// vote stamped exactly at closes_at is late.
func (d *Definition) WindowAt(ms int64) Window {
	switch {
	case d.Parked() || ms < d.OpensAt:
		return BeforeOpen
	case ms < d.ClosesAt:
		return InWindow
	case ms < d.GraceEnd():
		return InGrace
	}
	return AfterGrace
}

// StoreKey is the name a node stores a poll's definition under in its
// ledger's metadata (as a crdt.Register of the Definition, JSON): offline
// tools read it there.
func StoreKey(id string) string { return "poll/" + id }

// Parked reports whether d is a quiz question not yet started: only the
// host sees it, it takes no answers and its window has not begun
// (docs/quiz.md).
func (d *Definition) Parked() bool { return d.Quiz != nil && !d.Quiz.Started }

// Withheld reports whether only the host sees d at nowMs: a quiz question
// is shown to no one else before it opens, whether parked or created with
// a later opens_at, nor ever if the quiz ended before it was asked.
func (d *Definition) Withheld(nowMs int64) bool {
	return d.Quiz != nil && (d.Parked() || d.Quiz.Skipped || nowMs < d.OpensAt)
}

// GraceEnd is the wall time (Unix ms) at which the poll's grace window
// ends: from then on it may be certified. A parked question's never ends
// until it is started.
func (d *Definition) GraceEnd() int64 {
	if d.Parked() {
		return math.MaxInt64
	}
	return AddMs(d.ClosesAt, d.GraceMs)
}

// HasOption reports whether id is one of the poll's options.
func (d *Definition) HasOption(id string) bool {
	_, ok := d.OptionID(id)
	return ok
}

// OptionID returns the definition's own copy of option id, so that state
// kept per vote shares one string per option instead of one per request.
func (d *Definition) OptionID(id string) (string, bool) {
	for _, o := range d.Options {
		if o.ID == id {
			return o.ID, true
		}
	}
	return "", false
}

// Validate checks every rule of a definition.
// It is long because it is one rule per field, in the field order.
func (d *Definition) Validate() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
	if err := validID(d.ID); err != nil {
		return fail("id %v", err)
	}
	if err := validText(d.Question, MaxQuestionLen); err != nil {
		return fail("question %v", err)
	}
	if n := len(d.Options); n < MinOptions || n > MaxOptions {
		return fail("a poll needs %d-%d options, got %d", MinOptions, MaxOptions, n)
	}
	seen := make(map[string]bool, len(d.Options))
	for i, o := range d.Options {
		if err := validID(o.ID); err != nil {
			return fail("option %d: id %v", i, err)
		}
		if seen[o.ID] {
			return fail("option id %q appears twice", o.ID)
		}
		seen[o.ID] = true
		if err := validText(o.Label, MaxLabelLen); err != nil {
			return fail("option %q: label %v", o.ID, err)
		}
	}
	if d.Event != "" {
		if err := validID(d.Event); err != nil {
			return fail("event %v", err)
		}
	}
	if l := d.Limits; l != nil {
		for name, v := range map[string]float64{"ip_rate": l.IPRate, "voter_rate": l.VoterRate} {
			if v != 0 && !(v >= MinRate && v <= MaxRate) { // NaN fails too
				return fail("limits.%s must be 0 (the node's) or %g-%g votes per second", name, MinRate, MaxRate)
			}
		}
	}
	for name, v := range map[string]int64{"opens_at": d.OpensAt, "closes_at": d.ClosesAt} {
		if v < MinTime || v > MaxTime {
			return fail("%s must be a Unix time in milliseconds between %s and %s", name, msTime(MinTime), msTime(MaxTime))
		}
	}
	if d.ClosesAt <= d.OpensAt {
		return fail("closes_at must be after opens_at")
	}
	if d.ClosesAt-d.OpensAt > MaxDuration.Milliseconds() { // both bounded above: no overflow
		return fail("a poll may be open at most %v", MaxDuration)
	}
	if d.GraceMs < 0 || d.GraceMs > MaxGrace.Milliseconds() {
		return fail("grace must be 0-%v", MaxGrace)
	}
	if q := d.Quiz; q != nil {
		if err := validID(q.Quiz); err != nil {
			return fail("quiz %v", err)
		}
		if q.Title != "" {
			if err := validText(q.Title, quiz.MaxTitleLen); err != nil {
				return fail("quiz title %v", err)
			}
		}
		if q.Index < 0 || q.Index >= quiz.MaxQuestions {
			return fail("quiz index must be 0-%d", quiz.MaxQuestions-1)
		}
		if len(d.Options) > quiz.MaxOptions {
			return fail("a quiz question has %d-%d options", quiz.MinOptions, quiz.MaxOptions)
		}
		if len(q.Correct) == 0 {
			return fail("a quiz question needs a correct option")
		}
		for i, c := range q.Correct {
			if !seen[c] || slices.Contains(q.Correct[:i], c) {
				return fail("correct option %q is not an option, or given twice", c)
			}
		}
		if q.Points < 1 || q.Points > quiz.MaxPoints {
			return fail("points must be 1-%d", quiz.MaxPoints)
		}
		if q.LimitMs < quiz.MinLimit.Milliseconds() || q.LimitMs > quiz.MaxLimit.Milliseconds() {
			return fail("limit_ms must be %d-%d", quiz.MinLimit.Milliseconds(), quiz.MaxLimit.Milliseconds())
		}
		if d.GraceMs != 0 {
			return fail("a quiz question has no grace: an answer after its close is too late")
		}
	}
	return nil
}

func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

func validID(s string) error { return ids.Valid(s) }

func validText(s string, max int) error { return ids.DisplayText(s, max) }
