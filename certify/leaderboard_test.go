package certify

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
	"tally/poll"
	"tally/quiz"
	"tally/state"
)

// A quiz's ranking: counted over the questions certified and revealed,
// indexed by participant, the same digest as quiz.Digest of it, and kept
// until a question's certificate changes.
func TestRanking(t *testing.T) {
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st, err := state.New(state.Config{Replica: "eu-1", Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(ledger.Config{Dir: "l", FS: vfs.NewMem(), Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	hc, _ := hlc.New(hlc.Config{Replica: "eu-1", Now: clock})
	c, err := New(Config{State: st, Ledger: l, Peers: func() []Peer { return nil }, Clock: hc, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	opens := now.Add(-time.Hour).UnixMilli()
	question := func(i int, hidden bool, answers ...ledger.ScoredAnswer) {
		t.Helper()
		id := fmt.Sprintf("q-%d", i+1)
		d := poll.Definition{ID: id, Question: "?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
			OpensAt: opens, ClosesAt: opens + 20_000, Hidden: hidden,
			Quiz: &poll.QuizQuestion{Quiz: "q", Index: i, Correct: []string{"a"}, Points: 1000, LimitMs: 20_000, Started: true}}
		if _, err := st.Defs.PutPoll(d, hlc.Timestamp{Wall: opens + int64(i), Replica: "eu-1"}); err != nil {
			t.Fatal(err)
		}
		if answers == nil {
			return
		}
		detail, _ := json.Marshal(api.ResultDetail{Result: &ledger.Result{Poll: id, FirstWins: true, Answers: answers}})
		if _, err := st.Defs.PutCertificate(state.Certificate{Poll: id, Status: state.Reconciled, TS: hlc.Timestamp{Wall: now.UnixMilli(), Replica: "eu-1"},
			By: "eu-1", Digest: fmt.Sprintf("d%d-%d", i, len(answers)), Detail: detail}); err != nil {
			t.Fatal(err)
		}
	}
	question(0, false, ledger.ScoredAnswer{Voter: "ann", Option: "a", ElapsedMs: 2000, Score: 950, Name: "Ann"},
		ledger.ScoredAnswer{Voter: "bob", Option: "b", ElapsedMs: 1000, Score: 0})
	question(1, true, ledger.ScoredAnswer{Voter: "bob", Option: "a", ElapsedMs: 0, Score: 1000}) // certified, not revealed
	question(2, false)                                                                           // never started

	rk, err := c.Ranking("q")
	if err != nil {
		t.Fatal(err)
	}
	if rk.Participants() != 2 || fmt.Sprint(rk.Counted) != "[0]" || fmt.Sprint(rk.Pending) != "[1 2]" || rk.Final {
		t.Fatalf("ranking: %d participants, counted %v, pending %v, final %v", rk.Participants(), rk.Counted, rk.Pending, rk.Final)
	}
	want := quiz.Rank([]quiz.Answer{
		{Participant: c.Pseudonym("ann"), Question: 0, Option: "a", Correct: true, ElapsedMs: 2000, Score: 950, Name: "Ann"},
		{Participant: c.Pseudonym("bob"), Question: 0, Option: "b", ElapsedMs: 1000},
	})
	if rk.Digest != quiz.Digest("q", []int{0}, want) {
		t.Fatal("the digest is not quiz.Digest of the ranking")
	}
	for n, size := range map[int]int{-1: 0, 0: 0, 1: 1, 2: 2, 100: 2} {
		if got := len(rk.Top(n)); got != size {
			t.Errorf("Top(%d): %d standings", n, got)
		}
	}
	if s, ok := rk.Of("ann"); !ok || s.Rank != 1 || s.Score != 950 || s.Name != "Ann" {
		t.Fatalf("ann: %+v %v", s, ok)
	}
	if _, ok := rk.Of("nobody"); ok {
		t.Fatal("a participant who never answered is ranked")
	}

	// Kept: the same ranking while no certificate changes.
	again, _ := c.Ranking("q")
	if s, ok := again.Of("bob"); again.Digest != rk.Digest || !ok || s.Rank != 2 {
		t.Fatalf("the kept ranking: %s %+v %v", again.Digest, s, ok)
	}
	// The host reveals question 2: bob's 1,000 points count, and he leads.
	question(1, false, ledger.ScoredAnswer{Voter: "bob", Option: "a", ElapsedMs: 0, Score: 1000})
	after, _ := c.Ranking("q")
	if s, _ := after.Of("bob"); after.Digest == rk.Digest || s.Rank != 1 || s.Score != 1000 || fmt.Sprint(after.Counted) != "[0 1]" {
		t.Fatalf("after the reveal: %+v, counted %v", s, after.Counted)
	}
	if _, err := c.Ranking("nope"); err == nil {
		t.Fatal("a quiz that does not exist")
	}
}
