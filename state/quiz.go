package state

import (
	"slices"
	"tally/api"

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

// Quiz returns a quiz as seen at nowMs; host says whether the host asks
// (and sees every question, correct options and counts included). It
// reports false for a quiz that does not exist.
func (s *State) Quiz(id string, host bool, nowMs int64) (api.QuizView, bool) {
	qs := s.QuizQuestions(id)
	if len(qs) == 0 {
		return api.QuizView{}, false
	}
	v := api.QuizView{ID: id, Title: qs[0].Quiz.Title, Total: len(qs), Questions: []api.QuestionView{}, ServerTime: nowMs}
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
		qv := api.QuestionView{Index: d.Quiz.Index, Poll: d.ID, Text: d.Question, Options: d.Options,
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
