package state

import (
	"slices"

	"tally/poll"
)

// A quiz is a sequence of questions, each a poll whose definition carries
// poll.QuizQuestion (docs/quiz.md). A question not yet started is parked:
// its opening lies far ahead and only the host may see it.

// QuizQuestions returns the definitions of a quiz's questions, by index
// (docs/quiz.md: each question is a poll).
func (s *State) QuizQuestions(quizID string) []poll.Definition {
	s.mu.RLock()
	qs := make([]poll.Definition, 0, len(s.quizzes[quizID]))
	for id := range s.quizzes[quizID] {
		if reg, ok := s.defs.Get(id); ok && reg.Value.Quiz != nil && reg.Value.Quiz.Quiz == quizID {
			qs = append(qs, reg.Value)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(qs, func(a, b poll.Definition) int { return a.Quiz.Index - b.Quiz.Index })
	return qs
}

// Parked reports whether a quiz question has not been started: only the
// host sees it.
func Parked(d *poll.Definition, nowMs int64) bool { return d.Quiz != nil && nowMs < d.OpensAt }

// QuizView is a quiz as the API (GET /v1/quizzes/{quiz}) and the quiz's
// live stream show it.
type QuizView struct {
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
	// Status is ready (no question started), question (one is open),
	// between (the last one started is closed, more remain) or ended.
	Status    string         `json:"status"`
	Current   *int           `json:"current,omitempty"` // the index of the open question
	Started   int            `json:"started"`           // questions started so far
	Total     int            `json:"total"`             // questions in all
	Questions []QuestionView `json:"questions"`         // the started ones; every one for the host
	// ServerTime lets a page count down to a question's closes_at.
	ServerTime int64 `json:"server_time"`
}

// QuestionView is one question of a QuizView.
type QuestionView struct {
	Index    int           `json:"index"`
	Poll     string        `json:"poll"`
	Text     string        `json:"text"`
	Options  []poll.Option `json:"options"`
	Status   poll.Status   `json:"status"`
	Started  bool          `json:"started"`
	OpensAt  int64         `json:"opens_at,omitempty"`
	ClosesAt int64         `json:"closes_at,omitempty"` // the deadline, by the server's clock
	LimitMs  int64         `json:"limit_ms"`
	Points   int64         `json:"points"`
	Revealed bool          `json:"revealed"`
	// Answers is how many answers the question has had (the live count,
	// across the regions heard from); the split by option stays hidden
	// until the reveal.
	Answers int64 `json:"answers"`
	// Correct and Totals are shown once the question is revealed (and
	// always to the host).
	Correct []string         `json:"correct,omitempty"`
	Totals  map[string]int64 `json:"totals,omitempty"`
}

// Quiz returns a quiz as seen at nowMs; host says whether the host asks
// (and sees every question, correct options and counts included). It
// reports false for a quiz that does not exist.
func (s *State) Quiz(id string, host bool, nowMs int64) (QuizView, bool) {
	qs := s.QuizQuestions(id)
	if len(qs) == 0 {
		return QuizView{}, false
	}
	v := QuizView{ID: id, Title: qs[0].Quiz.Title, Total: len(qs), Questions: []QuestionView{}, ServerTime: nowMs}
	closedLast := false
	for _, d := range qs {
		started := !Parked(&d, nowMs)
		if started {
			v.Started++
		}
		if !started && !host {
			continue
		}
		cert, certified := s.Certificate(d.ID)
		qv := QuestionView{Index: d.Quiz.Index, Poll: d.ID, Text: d.Question, Options: d.Options,
			Status: d.StatusAt(nowMs, certified && cert.Status == Reconciled), Started: started,
			LimitMs: d.Quiz.LimitMs, Points: d.Quiz.Points, Revealed: !d.Hidden}
		if started {
			qv.OpensAt, qv.ClosesAt = d.OpensAt, d.ClosesAt
		}
		if qv.Status == poll.Open {
			i := d.Quiz.Index
			v.Current = &i
		}
		if started {
			closedLast = qv.Status != poll.Open
		}
		totals, answers, err := s.Totals(d.ID)
		if err == nil {
			qv.Answers = answers
		}
		if host || !d.Hidden {
			qv.Correct = d.Quiz.Correct
			qv.Totals = totals
		}
		v.Questions = append(v.Questions, qv)
	}
	switch {
	case v.Current != nil:
		v.Status = "question"
	case v.Started == 0:
		v.Status = "ready"
	case v.Started == v.Total && closedLast:
		v.Status = "ended"
	default:
		v.Status = "between"
	}
	return v, true
}
