package state

import (
	"fmt"
	"testing"

	"tally/api"
	"tally/hlc"
	"tally/poll"
)

// question is quiz q's question i, parked (opens is where it will open).
func question(q string, i int, opens int64) poll.Definition {
	d := def(fmt.Sprintf("%s-%d", q, i+1))
	d.OpensAt, d.ClosesAt, d.GraceMs, d.Hidden = opens, opens+20_000, 0, true
	d.Quiz = &poll.QuizQuestion{Quiz: q, Index: i, Correct: []string{"red"}, Points: 1000, LimitMs: 20_000}
	return d
}

// started is question started at opens.
func started(q string, i int, opens int64) poll.Definition {
	d := question(q, i, opens)
	d.Quiz.Started = true
	return d
}

// A quiz's questions are found by its index, in order, whatever else the
// node holds; a forgotten question leaves it; a restart rebuilds it.
func TestQuizQuestionsIndex(t *testing.T) {
	store := &memStore{}
	s, _ := New(Config{Replica: "eu-1", Store: store})
	const parked = 1_800_000_000_000
	for _, d := range []poll.Definition{question("pub", 2, parked), def("p"), question("pub", 0, parked), question("other", 0, parked), question("pub", 1, parked)} {
		if _, err := s.Defs.PutPoll(d, hlc.Timestamp{Wall: 5, Replica: "eu-1"}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(s *State, quiz string) string {
		var out []string
		for _, d := range s.Defs.QuizQuestions(quiz) {
			out = append(out, d.ID)
		}
		return fmt.Sprint(out)
	}
	if got := ids(s, "pub"); got != "[pub-1 pub-2 pub-3]" {
		t.Fatalf("pub: %s", got)
	}
	if got := ids(s, "nope") + ids(s, "p") + ids(s, ""); got != "[][][]" {
		t.Fatalf("not quizzes: %s", got)
	}
	if err := s.Defs.Forget("pub-2", 10); err != nil {
		t.Fatal(err)
	}
	if got := ids(s, "pub"); got != "[pub-1 pub-3]" {
		t.Fatalf("after forgetting pub-2: %s", got)
	}
	again, err := New(Config{Replica: "eu-1", Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(again, "pub") + ids(again, "other"); got != "[pub-1 pub-3][other-1]" {
		t.Fatalf("after a restart: %s", got)
	}
}

// The quiz view: nothing of a parked question but to the host; the
// status follows the questions; the correct options and the split of the
// answers only once revealed.
func TestQuizView(t *testing.T) {
	s, _ := New(Config{Replica: "eu-1"})
	const now = 1_796_083_200_000
	put := func(d poll.Definition, wall int64) {
		t.Helper()
		if _, err := s.Defs.PutPoll(d, hlc.Timestamp{Wall: wall, Replica: "eu-1"}); err != nil {
			t.Fatal(err)
		}
	}
	put(question("pub", 0, now+1e9), 1)
	put(question("pub", 1, now+1e9), 1)
	status := func(host bool, at int64) (string, int) {
		v, ok := api.QuizOf(s.Quizzes, "pub", host, at)
		if !ok {
			t.Fatal("no quiz")
		}
		return v.Status, len(v.Questions)
	}
	if st, n := status(false, now); st != "ready" || n != 0 {
		t.Fatalf("before the start: %s, %d questions shown", st, n)
	}
	if st, n := status(true, now); st != "ready" || n != 2 {
		t.Fatalf("the host before the start: %s, %d questions", st, n)
	}
	q := started("pub", 0, now)
	put(q, 2)
	v, _ := api.QuizOf(s.Quizzes, "pub", false, now+1000)
	if v.Status != "question" || v.Current == nil || *v.Current != 0 || len(v.Questions) != 1 || v.Questions[0].Correct != nil || v.Questions[0].Totals != nil {
		t.Fatalf("question 1 open: %+v", v)
	}
	if st, _ := status(false, now+20_000); st != "between" {
		t.Fatalf("question 1 closed: %s", st)
	}
	q.Hidden = false
	put(q, 3)
	v, _ = api.QuizOf(s.Quizzes, "pub", false, now+20_000)
	if qv := v.Questions[0]; !qv.Revealed || len(qv.Correct) != 1 || qv.Totals == nil {
		t.Fatalf("revealed: %+v", qv)
	}
	put(started("pub", 1, now+30_000), 4)
	if st, _ := status(false, now+50_000); st != "ended" {
		t.Fatalf("every question closed: %s", st)
	}
	if _, ok := api.QuizOf(s.Quizzes, "nope", true, now); ok {
		t.Fatal("a quiz that does not exist")
	}
}
