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

// Quizzes reads quizzes for api.QuizOf (an api.QuizSource): the questions
// are definitions, their counts and certificates the state's.
type Quizzes struct{ s *State }

// QuizQuestions returns the quiz's questions by index.
func (q Quizzes) QuizQuestions(quizID string) []poll.Definition {
	return q.s.Defs.QuizQuestions(quizID)
}

// Totals returns a question's live count per option and in all.
func (q Quizzes) Totals(pollID string) (map[string]int64, int64, error) { return q.s.Totals(pollID) }

// Certificate returns a question's certified result once there is one.
func (q Quizzes) Certificate(pollID string) (Certificate, bool) { return q.s.Defs.Certificate(pollID) }
