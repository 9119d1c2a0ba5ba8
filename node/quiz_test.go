package node

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"tally/quiz"
)

const quizQuestion = `{"id":"q1-0","question":"2+2?","options":[{"id":"a","label":"3"},{"id":"b","label":"4"},{"id":"c","label":"5"}],` +
	`"hidden":true,"quiz":{"quiz":"q1","index":0,"correct":["b"],"points":1000,"limit_ms":20000}}`

func answer(t *testing.T, tn *testNode, voter, option, idem string) response {
	t.Helper()
	return tn.call(t, "POST", "/v1/polls/q1-0/votes", `{"option":"`+option+`","voter":"`+voter+`","idem":"`+idem+`"}`)
}

// A quiz question at one node: answers are timed by the node's clock from
// the question's opening and scored; the first answer stands and a second
// one is refused; the correct option stays secret while the question is
// hidden; an answer after the time limit is too late; the certified
// result lists each participant's counted answer with its score.
func TestQuizQuestionAtOneNode(t *testing.T) {
	tn := startNode(t, t.TempDir(), nil)
	if r := tn.admin(t, "POST", "/v1/polls", quizQuestion); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	tn.clock.advance(2 * time.Second)
	r := answer(t, tn, "p1", "b", "k1")
	if r.status != 200 || !strings.Contains(r.raw, `"status":"accepted"`) || !strings.Contains(r.raw, `"elapsed_ms":2000`) {
		t.Fatalf("first answer: %d %s", r.status, r.raw)
	}
	if r := answer(t, tn, "p1", "b", "k1"); !strings.Contains(r.raw, `"status":"duplicate"`) {
		t.Fatalf("a retry: %d %s", r.status, r.raw)
	}
	if r := answer(t, tn, "p1", "c", "k2"); r.status != http.StatusConflict || r.code() != "already_answered" {
		t.Fatalf("a second answer: %d %s", r.status, r.raw)
	}
	if r := tn.call(t, "POST", "/v1/polls/q1-0/votes", `{"votes":[{"option":"a","voter":"p9","idem":"k9"},{"option":"b","voter":"p9","idem":"k10"}]}`); r.status != 400 {
		t.Fatalf("a batch of answers: %d %s", r.status, r.raw)
	}
	if r := answer(t, tn, "p2", "z", "k3"); r.code() != "invalid_option" {
		t.Fatalf("an unknown option: %d %s", r.status, r.raw)
	}
	tn.clock.advance(3 * time.Second)
	if r := answer(t, tn, "p2", "a", "k4"); r.status != 200 || !strings.Contains(r.raw, `"elapsed_ms":5000`) {
		t.Fatalf("a wrong answer: %d %s", r.status, r.raw)
	}
	// Hidden: neither the counts nor the correct option are shown, except to the admin.
	if r := tn.call(t, "GET", "/v1/polls/q1-0", ""); strings.Contains(r.raw, `"correct":[`) || strings.Contains(r.raw, "totals") {
		t.Fatalf("the hidden question shows its answer: %s", r.raw)
	}
	if r := tn.admin(t, "GET", "/v1/polls/q1-0", ""); !strings.Contains(r.raw, `"correct":["b"]`) {
		t.Fatalf("the admin does not see the answer: %s", r.raw)
	}
	tn.clock.advance(16 * time.Second) // 21 s: past the 20 s limit
	if r := answer(t, tn, "p3", "b", "k5"); r.status != http.StatusConflict || r.code() != "too_late" {
		t.Fatalf("an answer after the limit: %d %s", r.status, r.raw)
	}
	tn.admin(t, "POST", "/v1/polls/q1-0/reveal", "")
	tn.clock.advance(5 * time.Second)
	v := certifiedEverywhere(t, []*testNode{tn}, "q1-0")
	res := v.Detail.Result
	if !res.FirstWins || len(res.Answers) != 2 || res.Totals["b"] != 1 || res.Totals["a"] != 1 {
		t.Fatalf("certified: %+v", res)
	}
	want := map[string]int64{"p1": quiz.Score(true, 1000, 2000, 20_000), "p2": 0}
	for _, a := range res.Answers {
		if a.Score != want[a.Voter] {
			t.Errorf("%s scored %d, want %d", a.Voter, a.Score, want[a.Voter])
		}
	}
	if want["p1"] != 950 {
		t.Fatalf("the formula moved: %d", want["p1"])
	}
	// The export carries the node's measurement.
	ledger := tn.admin(t, "GET", "/v1/polls/q1-0/ledger", "")
	if !strings.Contains(ledger.raw, `"answer":{"elapsed_ms":2000,"score":950,"rtt_ms":-1}`) {
		t.Fatalf("the ledger export: %s", ledger.raw)
	}
}

// A participant cannot answer once per region: once the first answer's
// ballot has reached another region, an answer there is refused.
func TestQuizAnswerOncePerCluster(t *testing.T) {
	nodes := startCluster(t, []string{"eu-west", "us-east"}, nil)
	if r := nodes[0].admin(t, "POST", "/v1/polls", quizQuestion); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	havePoll(t, nodes, "q1-0")
	advanceAll(nodes, time.Second)
	if r := answer(t, nodes[0], "p1", "b", "k1"); r.status != 200 {
		t.Fatalf("answer at eu-west: %d %s", r.status, r.raw)
	}
	waitFor(t, func() bool { return nodes[1].state.Answered("q1-0", nodes[1].state.Hash("p1")) })
	r := answer(t, nodes[1], "p1", "a", "k2")
	if r.status != http.StatusConflict || r.code() != "already_answered" {
		t.Fatalf("a second answer at us-east: %d %s", r.status, r.raw)
	}
	var body struct{ Error struct{ Message string } }
	json.Unmarshal([]byte(r.raw), &body)
	if !strings.Contains(body.Error.Message, "first answer stands") {
		t.Fatalf("message: %s", r.raw)
	}
}
