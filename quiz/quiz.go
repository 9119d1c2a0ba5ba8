package quiz

import (
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"tally/ids"
)

// ErrInvalid is returned for a quiz that breaks the rules below.
var ErrInvalid = errors.New("quiz: invalid")

// Bounds of a quiz.
const (
	MinOptions     = 2
	MaxOptions     = 8
	MaxQuestions   = 100
	MaxQuestionLen = 300 // bytes
	MaxLabelLen    = 120 // bytes
	MaxTitleLen    = 120 // bytes
	MinLimit       = 5 * time.Second
	MaxLimit       = 10 * time.Minute
	DefaultLimit   = 20 * time.Second
	DefaultPoints  = 1000
	MaxPoints      = 10_000
)

// Option is one answer a participant can pick.
type Option struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// Question is one question of a quiz: its options, which of them are
// correct (one or more), how long participants have, and the points for an
// instant correct answer.
type Question struct {
	Text    string   `json:"text"`
	Options []Option `json:"options"`
	Correct []string `json:"correct"`
	LimitMs int64    `json:"limit_ms"`
	Points  int64    `json:"points"`
}

// Quiz is a host's sequence of questions.
type Quiz struct {
	ID        string     `json:"id"`
	Title     string     `json:"title"`
	Questions []Question `json:"questions"`
}

// Normalize fills in the defaults (time limit, points).
func (q *Quiz) Normalize() {
	for i := range q.Questions {
		if q.Questions[i].LimitMs == 0 {
			q.Questions[i].LimitMs = DefaultLimit.Milliseconds()
		}
		if q.Questions[i].Points == 0 {
			q.Questions[i].Points = DefaultPoints
		}
	}
}

// Validate checks the quiz against the bounds above, naming the first
// field that breaks them.
func (q *Quiz) Validate() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if err := ids.Valid(q.ID); err != nil {
		return fail("id %v", err)
	}
	if len(q.Title) > MaxTitleLen || !utf8.ValidString(q.Title) {
		return fail("title must be valid UTF-8 of at most %d bytes", MaxTitleLen)
	}
	if len(q.Questions) == 0 || len(q.Questions) > MaxQuestions {
		return fail("a quiz has 1-%d questions, not %d", MaxQuestions, len(q.Questions))
	}
	for i, qu := range q.Questions {
		at := fmt.Sprintf("question %d", i+1)
		if qu.Text == "" || len(qu.Text) > MaxQuestionLen || !utf8.ValidString(qu.Text) {
			return fail("%s: text must be 1-%d bytes of UTF-8", at, MaxQuestionLen)
		}
		if len(qu.Options) < MinOptions || len(qu.Options) > MaxOptions {
			return fail("%s: %d-%d options, not %d", at, MinOptions, MaxOptions, len(qu.Options))
		}
		seen := map[string]bool{}
		for _, o := range qu.Options {
			if err := ids.Valid(o.ID); err != nil {
				return fail("%s: option id %v", at, err)
			}
			if seen[o.ID] {
				return fail("%s: option %q twice", at, o.ID)
			}
			seen[o.ID] = true
			if o.Label == "" || len(o.Label) > MaxLabelLen || !utf8.ValidString(o.Label) {
				return fail("%s: option %q: label must be 1-%d bytes of UTF-8", at, o.ID, MaxLabelLen)
			}
		}
		if len(qu.Correct) == 0 {
			return fail("%s: at least one correct option", at)
		}
		for j, c := range qu.Correct {
			if !seen[c] {
				return fail("%s: correct option %q is not an option", at, c)
			}
			if slices.Contains(qu.Correct[:j], c) {
				return fail("%s: correct option %q twice", at, c)
			}
		}
		if qu.LimitMs < MinLimit.Milliseconds() || qu.LimitMs > MaxLimit.Milliseconds() {
			return fail("%s: limit_ms must be %d-%d", at, MinLimit.Milliseconds(), MaxLimit.Milliseconds())
		}
		if qu.Points < 1 || qu.Points > MaxPoints {
			return fail("%s: points must be 1-%d", at, MaxPoints)
		}
	}
	return nil
}

// IsCorrect reports whether option is one of the question's correct ones.
func (qu *Question) IsCorrect(option string) bool { return slices.Contains(qu.Correct, option) }
