package api

import (
	"tally/ledger"
	"tally/poll"
)

// QuizSource is what a quiz's view is built from; *state.State is one.
type QuizSource interface {
	// QuizQuestions returns the quiz's questions by index.
	QuizQuestions(quizID string) []poll.Definition
	// Totals returns a poll's live count per option and in all.
	Totals(pollID string) (map[string]int64, int64, error)
	// Certificate returns the poll's certified result once there is one.
	Certificate(pollID string) (ledger.Certificate, bool)
}

// QuizOf returns a quiz as seen at nowMs; host says whether the host asks
// (and sees every question, correct options and counts included). It
// reports false for a quiz that does not exist.
func QuizOf(s QuizSource, id string, host bool, nowMs int64) (QuizView, bool) {
	qs := s.QuizQuestions(id)
	if len(qs) == 0 {
		return QuizView{}, false
	}
	v := QuizView{ID: id, Title: qs[0].Quiz.Title, Total: len(qs), Questions: []QuestionView{}, ServerTime: nowMs}
	closedLast := false
	for _, d := range qs {
		skipped := d.Quiz.Skipped // ended before it was asked: done, but unseen
		started := !d.Withheld(nowMs) || skipped
		if started {
			v.Started++
		}
		if skipped && !host {
			closedLast = true
			continue
		}
		if !started && !host {
			continue
		}
		cert, certified := s.Certificate(d.ID)
		qv := QuestionView{Index: d.Quiz.Index, Poll: d.ID, Text: d.Question, Options: d.Options,
			Status: d.StatusAt(nowMs, certified && cert.Status == ledger.Reconciled), Started: started, Skipped: skipped,
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
