package quiz

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestScoreEdges(t *testing.T) {
	for _, c := range []struct {
		correct                bool
		points, elapsed, limit int64
		want                   int64
	}{
		{true, 1000, 0, 20_000, 1000},      // instant: all the points
		{true, 1000, 20_000, 20_000, 500},  // at the limit: half
		{true, 1000, 10_000, 20_000, 750},  // halfway: three quarters
		{true, 1000, 25_000, 20_000, 500},  // past the limit: clamped (ingest refuses those as too_late)
		{true, 1000, -5, 20_000, 1000},     // a negative time (clock step): clamped to 0
		{false, 1000, 0, 20_000, 0},        // wrong: nothing
		{true, 1, 20_000, 20_000, 1},       // half of 1 rounds up
		{true, 3, 20_000, 20_000, 2},       // 1.5 rounds up
		{true, 10_000, 1, 600_000, 10_000}, // 9999.99 rounds up
		{true, 10_000, 600_000, 600_000, 5000},
		{true, 0, 0, 20_000, 0},
		{true, 1000, 0, 0, 0},
	} {
		if got := Score(c.correct, c.points, c.elapsed, c.limit); got != c.want {
			t.Errorf("Score(%v, %d, %d, %d) = %d, want %d", c.correct, c.points, c.elapsed, c.limit, got, c.want)
		}
	}
}

// The score is never above the points nor below half of them (rounded
// up) for a correct answer, never rises as the answer comes later, and is
// the exact round-half-up of the formula.
func TestScoreProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		points := rapid.Int64Range(1, MaxPoints).Draw(t, "points")
		limit := rapid.Int64Range(MinLimit.Milliseconds(), MaxLimit.Milliseconds()).Draw(t, "limit")
		e := rapid.Int64Range(0, limit).Draw(t, "elapsed")
		later := rapid.Int64Range(e, limit).Draw(t, "later")
		s := Score(true, points, e, limit)
		if s > points || s < (points+1)/2 {
			t.Fatalf("score %d outside [%d, %d]", s, (points+1)/2, points)
		}
		if Score(true, points, later, limit) > s {
			t.Fatalf("a later answer scored more")
		}
		// round-half-up of points·(2L−e)/(2L), compared exactly: 2·num ≥ (2s−1)·den and 2·num < (2s+1)·den
		num, den := points*(2*limit-e), 2*limit
		if 2*num < (2*s-1)*den || 2*num >= (2*s+1)*den {
			t.Fatalf("Score(%d, %d, %d) = %d is not the rounded %d/%d", points, e, limit, s, num, den)
		}
	})
}

func validQuiz() Quiz {
	return Quiz{ID: "q1", Title: "Pub quiz", Questions: []Question{
		{Text: "2+2?", Options: []Option{{"a", "3"}, {"b", "4"}}, Correct: []string{"b"}},
		{Text: "Primes?", Options: []Option{{"a", "2"}, {"b", "4"}, {"c", "5"}}, Correct: []string{"a", "c"}, LimitMs: 30_000, Points: 2000},
	}}
}

func TestValidate(t *testing.T) {
	q := validQuiz()
	q.Normalize()
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	if q.Questions[0].LimitMs != DefaultLimit.Milliseconds() || q.Questions[0].Points != DefaultPoints {
		t.Fatalf("defaults not filled: %+v", q.Questions[0])
	}
	for name, mutate := range map[string]func(*Quiz){
		"bad id":             func(q *Quiz) { q.ID = "a b" },
		"no questions":       func(q *Quiz) { q.Questions = nil },
		"too many questions": func(q *Quiz) { q.Questions = make([]Question, MaxQuestions+1) },
		"empty text":         func(q *Quiz) { q.Questions[0].Text = "" },
		"long text":          func(q *Quiz) { q.Questions[0].Text = strings.Repeat("x", MaxQuestionLen+1) },
		"bad utf-8":          func(q *Quiz) { q.Questions[0].Text = "\xff" },
		"one option":         func(q *Quiz) { q.Questions[0].Options = q.Questions[0].Options[:1] },
		"nine options": func(q *Quiz) {
			for i := range 7 {
				q.Questions[0].Options = append(q.Questions[0].Options, Option{fmt.Sprint("o", i), "x"})
			}
		},
		"duplicate option":   func(q *Quiz) { q.Questions[0].Options[1].ID = "a" },
		"empty label":        func(q *Quiz) { q.Questions[0].Options[0].Label = "" },
		"no correct":         func(q *Quiz) { q.Questions[0].Correct = nil },
		"unknown correct":    func(q *Quiz) { q.Questions[0].Correct = []string{"z"} },
		"correct twice":      func(q *Quiz) { q.Questions[1].Correct = []string{"a", "a"} },
		"limit too short":    func(q *Quiz) { q.Questions[0].LimitMs = 4999 },
		"limit too long":     func(q *Quiz) { q.Questions[0].LimitMs = MaxLimit.Milliseconds() + 1 },
		"negative points":    func(q *Quiz) { q.Questions[0].Points = -1 },
		"too many points":    func(q *Quiz) { q.Questions[0].Points = MaxPoints + 1 },
		"overflowing points": func(q *Quiz) { q.Questions[0].Points = 1 << 62 },
		"long title":         func(q *Quiz) { q.Title = strings.Repeat("t", MaxTitleLen+1) },
	} {
		q := validQuiz()
		q.Normalize()
		mutate(&q)
		if err := q.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
}

func TestRankTiesAndOrder(t *testing.T) {
	got := Rank([]Answer{
		{Participant: "carol", Question: 0, Correct: true, ElapsedMs: 900, Score: 900},
		{Participant: "alice", Question: 0, Correct: true, ElapsedMs: 1000, Score: 900},
		{Participant: "bob", Question: 0, Correct: true, ElapsedMs: 1000, Score: 900},
		{Participant: "dave", Question: 0, Correct: false, ElapsedMs: 10, Score: 0},
		{Participant: "erin", Question: 0, Correct: true, ElapsedMs: 100, Score: 990},
	})
	var order []string
	var ranks []int
	for _, s := range got {
		order = append(order, s.Participant)
		ranks = append(ranks, s.Rank)
	}
	if fmt.Sprint(order) != "[erin carol alice bob dave]" || fmt.Sprint(ranks) != "[1 2 3 3 5]" {
		t.Fatalf("order %v ranks %v", order, ranks)
	}
	if len(Rank(nil)) != 0 {
		t.Fatal("an empty leaderboard has standings")
	}
}

// Ranking does not depend on the order of the answers.
func TestRankIsOrderFree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		answers := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Answer {
			correct := rapid.Bool().Draw(t, "correct")
			e := rapid.Int64Range(0, 20_000).Draw(t, "e")
			return Answer{Participant: rapid.SampledFrom([]string{"a", "b", "c", "d"}).Draw(t, "p"),
				Correct: correct, ElapsedMs: e, Score: Score(correct, 1000, e, 20_000)}
		}), 0, 20).Draw(t, "answers")
		want := fmt.Sprint(Rank(answers))
		shuffled := rapid.Permutation(answers).Draw(t, "order")
		if got := fmt.Sprint(Rank(shuffled)); got != want {
			t.Fatalf("order changed the ranking:\n%s\n%s", got, want)
		}
	})
}

// A participant's name is the one given with their latest named answer.
func TestRankKeepsTheLatestName(t *testing.T) {
	got := Rank([]Answer{
		{Participant: "p", Question: 2, Name: "Ann"},
		{Participant: "p", Question: 0, Name: "Annie"},
		{Participant: "p", Question: 3},
		{Participant: "q", Question: 1},
	})
	if got[0].Name != "Ann" || got[1].Name != "" {
		t.Fatalf("%+v", got)
	}
	if Digest("z", nil, got) == Digest("z", nil, Rank([]Answer{{Participant: "p", Question: 2, Name: "Bob"}, {Participant: "q", Question: 1}})) {
		t.Fatal("the name is not in the digest")
	}
}

// FuzzQuizDefinition: any body of POST /v1/quizzes decodes, normalizes and
// validates without a panic, and what validates keeps every rule: the
// node creates one poll per question from it, and scores against it.
func FuzzQuizDefinition(f *testing.F) {
	f.Add([]byte(`{"id":"pub","title":"Pub quiz","questions":[{"text":"2+2?","options":[{"id":"a","label":"3"},{"id":"b","label":"4"}],"correct":["b"],"limit_ms":20000,"points":1000}]}`))
	f.Add([]byte(`{"id":"pub","questions":[{"text":"?","options":[{"id":"a","label":"A"},{"id":"a","label":"A"}],"correct":["a","a"]}]}`))
	f.Add([]byte(`{"id":"x","questions":[{"text":"q","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"correct":["c"],"limit_ms":-1,"points":9223372036854775807}]}`))
	f.Add([]byte(`{"id":"","questions":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var q Quiz
		if json.Unmarshal(body, &q) != nil {
			return
		}
		q.Normalize()
		if q.Validate() != nil {
			return
		}
		if len(q.Questions) < 1 || len(q.Questions) > MaxQuestions {
			t.Fatalf("%d questions validated", len(q.Questions))
		}
		for _, qu := range q.Questions {
			if len(qu.Options) < MinOptions || len(qu.Options) > MaxOptions || len(qu.Correct) == 0 || len(qu.Correct) > len(qu.Options) {
				t.Fatalf("a question validated with %d options and %d correct", len(qu.Options), len(qu.Correct))
			}
			for _, c := range qu.Correct {
				if !slices.ContainsFunc(qu.Options, func(o Option) bool { return o.ID == c }) {
					t.Fatalf("correct option %q is not an option", c)
				}
			}
			// The score stays in bounds at both ends of the time limit.
			if s := Score(true, qu.Points, 0, qu.LimitMs); s != qu.Points {
				t.Fatalf("an instant answer scored %d of %d", s, qu.Points)
			}
			if s := Score(true, qu.Points, qu.LimitMs, qu.LimitMs); s < qu.Points/2 || s > qu.Points {
				t.Fatalf("an answer at the limit scored %d of %d", s, qu.Points)
			}
		}
	})
}

// The README's example quiz is a valid one.
func TestExampleQuizIsValid(t *testing.T) {
	b, err := os.ReadFile("../docs/pub-quiz.json")
	if err != nil {
		t.Fatal(err)
	}
	var q Quiz
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	q.Normalize()
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
}
