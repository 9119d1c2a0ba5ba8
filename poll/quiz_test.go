package poll

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

func quizSpec() Spec {
	return Spec{ID: "q1-0", Question: "2+2?", Options: []Option{{"a", "3"}, {"b", "4"}},
		Quiz: &QuizQuestion{Quiz: "q1", Index: 0, Correct: []string{"b"}, Points: 1000, LimitMs: 20_000}}
}

// A quiz question closes at its time limit and has no grace.
func TestQuizQuestionDefaults(t *testing.T) {
	d, err := quizSpec().Definition(1_796_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if d.ClosesAt-d.OpensAt != 20_000 || d.GraceMs != 0 {
		t.Fatalf("closes after %d ms, grace %d", d.ClosesAt-d.OpensAt, d.GraceMs)
	}
	if d.Parked() { // created as a poll, it runs on its own schedule
		t.Fatal("a question created as a poll is parked")
	}
}

// A parked question has not begun, whatever the time: it is scheduled,
// takes nothing and never reaches its grace end.
func TestParkedQuestionWaitsForItsStart(t *testing.T) {
	d, _ := quizSpec().Definition(1_796_000_000_000)
	d.Quiz.Started = false
	later := d.ClosesAt + 1_000_000
	if d.StatusAt(later, false) != Scheduled || d.WindowAt(later) != BeforeOpen || d.GraceEnd() != math.MaxInt64 {
		t.Fatalf("parked: %s, window %d, grace end %d", d.StatusAt(later, false), d.WindowAt(later), d.GraceEnd())
	}
	d.Quiz.Started = true
	if d.StatusAt(later, false) != Closed || d.WindowAt(later) != AfterGrace {
		t.Fatalf("started: %s, window %d", d.StatusAt(later, false), d.WindowAt(later))
	}
}

func TestQuizQuestionRefusesMistakes(t *testing.T) {
	five := 5.0
	for name, mutate := range map[string]func(*Spec){
		"no correct":      func(s *Spec) { s.Quiz.Correct = nil },
		"unknown correct": func(s *Spec) { s.Quiz.Correct = []string{"z"} },
		"correct twice":   func(s *Spec) { s.Quiz.Correct = []string{"b", "b"} },
		"zero points":     func(s *Spec) { s.Quiz.Points = 0 },
		"huge points":     func(s *Spec) { s.Quiz.Points = 1 << 60 },
		"short limit":     func(s *Spec) { s.Quiz.LimitMs = 100 },
		"huge limit":      func(s *Spec) { s.Quiz.LimitMs = 1 << 62 },
		"negative index":  func(s *Spec) { s.Quiz.Index = -1 },
		"index too high":  func(s *Spec) { s.Quiz.Index = 100 },
		"bad quiz id":     func(s *Spec) { s.Quiz.Quiz = "a b" },
		"a grace":         func(s *Spec) { s.GraceS = &five },
		"nine options": func(s *Spec) {
			for _, id := range []string{"c", "d", "e", "f", "g", "h", "i"} {
				s.Options = append(s.Options, Option{id, id})
			}
		},
	} {
		s := quizSpec()
		q := *s.Quiz
		s.Quiz = &q
		mutate(&s)
		if _, err := s.Definition(1_796_000_000_000); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
}

// A question written before the started field existed is read as the
// earlier version meant it: parked when it opens 29 days after the write
// of its schedule, started otherwise; one written now says so itself, and
// unknown fields are refused.
func TestQuestionsOfAnEarlierVersionUpgrade(t *testing.T) {
	const wrote = 1_796_000_000_000
	legacy := func(opens int64) Definition {
		var d Definition
		b := fmt.Sprintf(`{"id":"q-1","question":"?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"opens_at":%d,"closes_at":%d,"grace_ms":0,`+
			`"quiz":{"quiz":"q","index":0,"correct":["a"],"points":1000,"limit_ms":20000},"close_stamp":{"wall":%d,"logical":0,"replica":"eu-1"}}`, opens, opens+20_000, wrote)
		if err := json.Unmarshal([]byte(b), &d); err != nil {
			t.Fatal(err)
		}
		d.Upgrade()
		return d
	}
	if d := legacy(wrote + 29*24*3600*1000); !d.Parked() {
		t.Fatal("a question parked by an earlier version reads as started")
	}
	if d := legacy(wrote); d.Parked() {
		t.Fatal("a question started by an earlier version reads as parked")
	}
	d := legacy(wrote)
	b, _ := json.Marshal(d)
	var again Definition
	if err := json.Unmarshal(b, &again); err != nil || again.Quiz.legacy || !again.Quiz.Started || !strings.Contains(string(b), `"started":true`) {
		t.Fatalf("written again: %s %v", b, err)
	}
	if err := json.Unmarshal([]byte(`{"quiz":"q","index":0,"points":1,"limit_ms":5000,"started":true,"extra":1}`), new(QuizQuestion)); err == nil {
		t.Fatal("an unknown field in a quiz question was accepted")
	}
}
