package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
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

// banned is a NameFilter refusing names that contain a word.
type banned string

func (b banned) Allow(name string) bool { return !strings.Contains(strings.ToLower(name), string(b)) }

// quizPipeline is a pipeline on an in-memory ledger whose clock stands at
// now, holding quiz question q-1 (opened openedAgo before now, correct "a",
// 1,000 points in 20 s), and the polls extra.
func quizPipeline(t testing.TB, now time.Time, openedAgo time.Duration, names NameFilter, extra ...poll.Definition) (*Pipeline, *ledger.Ledger) {
	t.Helper()
	clock := func() time.Time { return now }
	l, err := ledger.Open(ledger.Config{Dir: "q", FS: vfs.NewMem(), Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	st, _ := state.New(state.Config{Replica: "eu-1", Store: l, Now: clock})
	hc, _ := hlc.New(hlc.Config{Replica: "eu-1", Now: clock})
	ts := hlc.Timestamp{Wall: now.UnixMilli(), Replica: "eu-1"}
	opens := now.Add(-openedAgo).UnixMilli()
	q := poll.Definition{ID: "q-1", Question: "Q?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}}, OpensAt: opens, ClosesAt: opens + 20_000,
		Quiz: &poll.QuizQuestion{Quiz: "q", Correct: []string{"a"}, Points: 1000, LimitMs: 20_000, Started: true}}
	for _, d := range append([]poll.Definition{q}, extra...) {
		if _, err := st.Defs.PutPoll(d, ts); err != nil {
			t.Fatal(err)
		}
	}
	p, err := New(Config{Ledger: l, State: st, Clock: hc, Limits: Limits{MaxBody: 1 << 14}, Now: clock, Names: names})
	if err != nil {
		t.Fatal(err)
	}
	return p, l
}

// Display names: on quiz answers only, well formed, and vetted by the
// node's filter; the accepted one is ledgered with the answer.
func TestQuizDisplayNames(t *testing.T) {
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	p, l := quizPipeline(t, now, time.Second, banned("rude"), poll.Definition{ID: "p", Question: "P?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: now.UnixMilli() - 1000, ClosesAt: now.UnixMilli() + 20_000, GraceMs: 1000})
	code := func(err error) string {
		var e *api.Error
		if errors.As(err, &e) {
			return e.Code
		}
		return ""
	}
	if _, err := p.Submit("p", []Vote{{Option: "a", Voter: "v", Idem: "k0", Name: "Ann"}}, "192.0.2.1"); code(err) != api.CodeInvalidRequest {
		t.Fatalf("a name on a poll vote: %v", err)
	}
	if _, err := p.Submit("q-1", []Vote{{Option: "a", Voter: "v", Idem: "k1", Name: "Mr Rude"}}, "192.0.2.1"); code(err) != api.CodeInvalidRequest {
		t.Fatalf("a refused name: %v", err)
	}
	for _, body := range []string{
		`{"option":"a","voter":"v","idem":"k","name":"` + strings.Repeat("n", ledger.MaxNameLen+1) + `"}`,
		`{"option":"a","voter":"v","idem":"k","name":"bell\u0007"}`,
		`{"option":"a","voter":"v","idem":"k","name":"\u202eevil"}`, // right-to-left override: a spoofed name
		`{"option":"a","voter":"v","idem":"k","name":"Ann\u2066"}`,
		`{"option":"a","voter":"v","idem":"k","name":"A\u200bnn"}`, // zero-width space
		`{"votes":[{"option":"a","voter":"v","idem":"k"}],"name":"Ann"}`,
	} {
		if _, err := DecodeVotes([]byte(body)); code(err) != api.CodeInvalidRequest {
			t.Errorf("%s: %v", body, err)
		}
	}
	if _, err := p.Submit("q-1", []Vote{{Option: "a", Voter: "v", Idem: "k2", Name: "Ann ✓"}}, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	for r, err := range l.Scan("q-1") {
		if err != nil || r.Answer == nil || r.Answer.Name != "Ann ✓" || r.Answer.ElapsedMs != 0 { // the question reached this node "now"
			t.Fatalf("the ledgered answer: %+v %v", r.Answer, err)
		}
	}
}

// A quiz answer's time runs from when the question reached the client's
// socket to when the transport read the answer: the time the answer then
// spends in the node (decoding, a busy scheduler) costs nothing.
func TestQuizAnswerTimedToItsReceipt(t *testing.T) {
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	p, l := quizPipeline(t, now, 4500*time.Millisecond, nil) // shown 0.5 s after it opened
	shown := now.UnixMilli() - 4000
	for i, c := range []struct {
		received, want int64
	}{
		{now.UnixMilli() - 2500, 1500}, // read 2.5 s before it was stamped
		{0, 4000},                      // not known: the stamp
	} {
		voter := string(rune('v' + i))
		if _, err := p.SubmitFrom("q-1", []Vote{{Option: "a", Voter: voter, Idem: voter}}, Client{Sender: api.Sender{IP: "192.0.2.1", SocketAge: time.Second, ShownMs: shown, RTTMs: -1, ReceivedMs: c.received}, TokenAge: -1}); err != nil {
			t.Fatal(err)
		}
		found := 0
		for r, err := range l.Scan("q-1") {
			if err == nil && r.Voter == voter {
				found++
				if r.Answer == nil || r.Answer.ElapsedMs != c.want {
					t.Fatalf("received %d: %+v, want %d ms", c.received, r.Answer, c.want)
				}
			}
		}
		if found != 1 {
			t.Fatalf("%d records of %s", found, voter)
		}
	}
}

// TestQuizClockBelongsToTheParticipant: a participant who read the
// question, waited and answered from a fresh socket (or over HTTP, or at a
// region or restarted node that never showed it to them) is timed from
// the first moment this node showed it to them, and never from later than
// the question's opening plus quiz.AllowanceMs (issue 25, item 2).
func TestQuizClockBelongsToTheParticipant(t *testing.T) {
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	p, l := quizPipeline(t, now, 13500*time.Millisecond, nil) // opened 13.5 s ago
	opens := now.UnixMilli() - 13500
	// Shown on the quiz stream 0.2 s after the opening to "reader", who
	// then opens a new socket 12 s later and answers at once.
	p.cfg.State.MarkShown("q-1", "reader", opens+200)
	fresh := now.UnixMilli() - 5
	cases := []struct {
		voter string
		c     Client
		want  int64
	}{
		{"reader", Client{Sender: api.Sender{IP: "192.0.2.1", SocketAge: time.Second, ShownMs: fresh, RTTMs: -1}, TokenAge: -1}, 13_300},
		// Never shown here (another region showed it, or this node
		// restarted): at most opens + AllowanceMs.
		{"mover", Client{Sender: api.Sender{IP: "192.0.2.2", SocketAge: time.Second, ShownMs: fresh, RTTMs: -1}, TokenAge: -1}, 13_500 - quiz.AllowanceMs},
		{"http", Client{Sender: api.Sender{IP: "192.0.2.3", SocketAge: -1, RTTMs: -1}, TokenAge: -1}, 13_500 - quiz.AllowanceMs},
	}
	for _, c := range cases {
		if _, err := p.SubmitFrom("q-1", []Vote{{Option: "a", Voter: c.voter, Idem: c.voter}}, c.c); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int64{}
	for r, err := range l.Scan("q-1") {
		if err != nil || r.Answer == nil {
			t.Fatalf("%+v %v", r, err)
		}
		got[r.Voter] = r.Answer.ElapsedMs
	}
	for _, c := range cases {
		if got[c.voter] != c.want {
			t.Errorf("%s timed %d ms, want %d", c.voter, got[c.voter], c.want)
		}
	}
}

// Names that look alike are one name: an answer's name is put in its
// normal form before the filter sees it and before it is ledgered; a name
// that looks like another participant's in the quiz is a 400 saying so,
// and ledgers nothing; the participant who holds a name answers the next
// question with it again.
func TestQuizAnswerRefusesALookAlikeName(t *testing.T) {
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	second := poll.Definition{ID: "q-2", Question: "Q2?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}}, OpensAt: now.UnixMilli() - 1000, ClosesAt: now.UnixMilli() + 20_000,
		Quiz: &poll.QuizQuestion{Quiz: "q", Index: 1, Correct: []string{"a"}, Points: 1000, LimitMs: 20_000, Started: true}}
	p, l := quizPipeline(t, now, time.Second, banned("fuck"), second)
	answer := func(question, voter, name string) (int, string) {
		body, _ := json.Marshal(map[string]string{"option": "a", "voter": voter, "idem": voter + question, "name": name})
		req := httptest.NewRequest(http.MethodPost, "/v1/polls/"+question+"/votes", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.SetPathValue("poll", question)
		rec := httptest.NewRecorder()
		p.HandleVotes(rec, req)
		return rec.Code, rec.Body.String()
	}
	for _, styled := range []string{"𝐟𝐮𝐜𝐤", "ｆｕｃｋ", "ⓕⓤⓒⓚ"} {
		if status, body := answer("q-1", "rude", styled); status != http.StatusBadRequest || !strings.Contains(body, "not allowed") {
			t.Errorf("%q past the filter: %d %s", styled, status, body)
		}
	}
	if status, body := answer("q-1", "ann", "Ann"); status != http.StatusOK {
		t.Fatalf("Ann's answer: %d %s", status, body)
	}
	if status, body := answer("q-1", "zoe", "𝐙𝐨𝐞"); status != http.StatusOK {
		t.Fatalf("Zoe's answer: %d %s", status, body)
	}
	for i, lookAlike := range []string{"Аnn", "ANN", "Ⓐⓝⓝ"} { // a Cyrillic А, capitals, circled
		status, body := answer("q-1", fmt.Sprint("mallory", i), lookAlike)
		if status != http.StatusBadRequest || !strings.Contains(body, `"invalid_request"`) || !strings.Contains(body, "looks like another participant") {
			t.Errorf("%q beside Ann: %d %s", lookAlike, status, body)
		}
	}
	if status, body := answer("q-2", "ann", "Ann"); status != http.StatusOK {
		t.Errorf("Ann's own name on her next answer: %d %s", status, body)
	}
	if status, _ := answer("q-2", "mallory0", "ANN"); status != http.StatusBadRequest {
		t.Errorf("a look-alike on the next question: %d", status)
	}
	ledgered := map[string]string{}
	for r, err := range l.Scan("q-1") {
		if err != nil || r.Answer == nil {
			t.Fatalf("%+v %v", r, err)
		}
		ledgered[r.Voter] = r.Answer.Name
	}
	if want := map[string]string{"ann": "Ann", "zoe": "Zoe"}; !maps.Equal(ledgered, want) {
		t.Fatalf("ledgered %v, want %v (names in their normal form, no look-alike)", ledgered, want)
	}
}
