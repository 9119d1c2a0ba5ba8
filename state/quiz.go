package state

import (
	"slices"

	"tally/poll"
)

// A quiz is a sequence of questions, each a poll whose definition carries
// poll.QuizQuestion (docs/quiz.md). A question not yet started is parked
// (poll.Definition.Parked); api.QuizOf builds the quiz's view.

// QuizQuestions returns the definitions of a quiz's questions, by index
// (docs/quiz.md: each question is a poll).
func (d *Definitions) QuizQuestions(quizID string) []poll.Definition {
	d.mu.RLock()
	qs := make([]poll.Definition, 0, len(d.quizzes[quizID]))
	for id := range d.quizzes[quizID] {
		if reg, ok := d.defs.Get(id); ok && reg.Value.Quiz != nil && reg.Value.Quiz.Quiz == quizID {
			qs = append(qs, reg.Value)
		}
	}
	d.mu.RUnlock()
	slices.SortFunc(qs, func(a, b poll.Definition) int { return a.Quiz.Index - b.Quiz.Index })
	return qs
}
