package ingest

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tally/api"
	"tally/ledger"
	"tally/poll"
)

// countingLedger counts appends, and fails them while fail is set.
type countingLedger struct {
	*ledger.Ledger
	appends atomic.Int64
	fail    atomic.Bool
}

func (c *countingLedger) Append(recs ...ledger.Record) ([]ledger.Appended, error) {
	c.appends.Add(1)
	if c.fail.Load() {
		return nil, errors.New("disk on fire")
	}
	return c.Ledger.Append(recs...)
}

func batchPipeline(t testing.TB, now time.Time) (*Pipeline, *countingLedger) {
	t.Helper()
	p0 := poll.Definition{ID: "p", Question: "Q?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: now.Add(-time.Minute).UnixMilli(), ClosesAt: now.Add(time.Hour).UnixMilli()}
	p, l := quizPipeline(t, now, time.Second, nil, p0)
	cl := &countingLedger{Ledger: l}
	p.cfg.Ledger = cl
	return p, cl
}

func req(body string) Request {
	return Request{Body: []byte(body), Sender: api.HTTPSender("192.0.2.7", "test", "", 0)}
}

func errCode(err error) string {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// A relayed batch is answered request by request exactly as Vote answers
// each (bad ones refused alone, retries as duplicates with the first id,
// a change of mind counted last), with one ledger append for all of it.
func TestVoteBatchAnswersEachRequestWithOneAppend(t *testing.T) {
	now := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	p, l := batchPipeline(t, now)
	first, err := p.Submit("p", []Vote{{Option: "a", Voter: "alice", Idem: "k1"}}, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	before := l.appends.Load()
	replies := p.VoteBatch("p", []Request{
		req(`{"option":"a","voter":"bob","idem":"k2"}`),
		req(`not json`),
		req(`{"option":"zzz","voter":"eve","idem":"k9"}`),
		req(`{"option":"a","voter":"alice","idem":"k1"}`),
		req(`{"option":"b","voter":"bob","idem":"k3"}`),
		req(`{"option":"a","voter":"bob","idem":"k2"}`),
		req(`{"votes":[{"option":"a","voter":"carol","idem":"k4"},{"option":"b","voter":"dave","idem":"k5"}]}`),
		req(`{"option":"a","voter":"` + strings.Repeat("x", 1<<14) + `","idem":"k6"}`),
		req(``),
	})
	if got := l.appends.Load() - before; got != 1 {
		t.Fatalf("%d appends for one batch, want 1", got)
	}
	status := func(i, j int) string { return replies[i].Response.Results[j].Status }
	for _, c := range []struct {
		i    int
		code string
	}{{1, api.CodeInvalidRequest}, {2, api.CodeInvalidOption}, {7, api.CodeTooLarge}, {8, api.CodeInvalidRequest}} {
		if errCode(replies[c.i].Err) != c.code {
			t.Errorf("request %d: %v, want %s", c.i, replies[c.i].Err, c.code)
		}
	}
	for _, i := range []int{0, 3, 4, 5, 6} {
		if replies[i].Err != nil {
			t.Fatalf("request %d: %v", i, replies[i].Err)
		}
	}
	if status(0, 0) != StatusAccepted || status(4, 0) != StatusAccepted || status(6, 0) != StatusAccepted || status(6, 1) != StatusAccepted {
		t.Fatalf("new votes: %+v", replies)
	}
	if status(3, 0) != StatusDuplicate || replies[3].Response.Results[0].VoteID != first[0].VoteID {
		t.Fatalf("alice's retry: %+v, first %+v", replies[3].Response.Results, first)
	}
	if status(5, 0) != StatusDuplicate || replies[5].Response.Results[0].VoteID != replies[0].Response.Results[0].VoteID {
		t.Fatalf("bob's retry in the same batch: %+v against %+v", replies[5].Response.Results, replies[0].Response.Results)
	}
	if replies[0].Response.ServerTime != now.UnixMilli() {
		t.Fatalf("server time %d", replies[0].Response.ServerTime)
	}
	records := map[string]int{}
	for r, err := range l.Scan("p") {
		if err != nil {
			t.Fatal(err)
		}
		records[r.Voter]++
	}
	if records["alice"] != 1 || records["bob"] != 2 || records["carol"] != 1 || records["dave"] != 1 || len(records) != 4 {
		t.Fatalf("ledgered: %v", records)
	}
	tl, _ := p.cfg.State.Tally("p")
	if tl.Value("a") != 2 || tl.Value("b") != 2 { // alice, carol; bob's last, dave
		t.Fatalf("counts a=%d b=%d, want 2 and 2", tl.Value("a"), tl.Value("b"))
	}
	// The same batch again: every vote a duplicate with its first id, no
	// append at all.
	before = l.appends.Load()
	again := p.VoteBatch("p", []Request{req(`{"option":"a","voter":"bob","idem":"k2"}`), req(`{"option":"b","voter":"bob","idem":"k3"}`)})
	if l.appends.Load() != before || again[0].Response.Results[0].VoteID != replies[0].Response.Results[0].VoteID ||
		again[1].Response.Results[0].VoteID != replies[4].Response.Results[0].VoteID {
		t.Fatalf("retried batch: %+v", again)
	}
}

// When the append fails, every request with a new vote gets 503 and gives
// its rate-limit tokens back; retries in the same batch are still answered;
// nothing is counted.
func TestVoteBatchFailedAppend(t *testing.T) {
	now := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	p, l := batchPipeline(t, now)
	p.ipLim = newLimiter(0.001, 2) // two votes from the address, ever
	if _, err := p.Submit("p", []Vote{{Option: "a", Voter: "alice", Idem: "k1"}}, "192.0.2.7"); err != nil {
		t.Fatal(err)
	}
	l.fail.Store(true)
	replies := p.VoteBatch("p", []Request{req(`{"option":"b","voter":"bob","idem":"k2"}`), req(`{"option":"a","voter":"alice","idem":"k1"}`)})
	var e *api.Error
	if !errors.As(replies[0].Err, &e) || e.Status != http.StatusServiceUnavailable {
		t.Fatalf("new vote on a failing ledger: %v", replies[0].Err)
	}
	if replies[1].Err != nil || replies[1].Response.Results[0].Status != StatusDuplicate {
		t.Fatalf("retry on a failing ledger: %+v %v", replies[1].Response, replies[1].Err)
	}
	l.fail.Store(false)
	// bob's token came back: the address still has its second vote.
	if r := p.VoteBatch("p", []Request{req(`{"option":"b","voter":"bob","idem":"k2"}`)}); r[0].Err != nil || r[0].Response.Results[0].Status != StatusAccepted {
		t.Fatalf("bob after the failure: %+v %v", r[0].Response, r[0].Err)
	}
	tl, _ := p.cfg.State.Tally("p")
	if tl.Value("a") != 1 || tl.Value("b") != 1 {
		t.Fatalf("counts a=%d b=%d, want 1 and 1", tl.Value("a"), tl.Value("b"))
	}
}

// A quiz question takes one answer a participant; two in one batch are the
// first and an already_answered, and the reservation ends with the batch.
func TestVoteBatchQuizOneAnswer(t *testing.T) {
	now := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	p, _ := batchPipeline(t, now)
	replies := p.VoteBatch("q-1", []Request{req(`{"option":"a","voter":"ann","idem":"x1"}`), req(`{"option":"b","voter":"ann","idem":"x2"}`)})
	if replies[0].Err != nil || replies[0].Response.Results[0].Status != StatusAccepted || replies[0].Response.Results[0].ElapsedMs == nil {
		t.Fatalf("first answer: %+v %v", replies[0].Response, replies[0].Err)
	}
	if errCode(replies[1].Err) != api.CodeAlreadyAnswered {
		t.Fatalf("second answer in the batch: %v", replies[1].Err)
	}
	if len(p.answering) != 0 {
		t.Fatalf("reservations left: %v", p.answering)
	}
}

// Votes an edge decoded are answered as their JSON would be, with no
// decoding here, and checked all the same: a member's edge relaying a
// vote no client could have sent (an empty key, an overlong name, too
// many) is refused for that request alone and nothing is counted.
func TestVoteBatchChecksDecodedVotes(t *testing.T) {
	now := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	p, _ := batchPipeline(t, now)
	decoded := func(votes ...Vote) Request {
		return Request{Votes: votes, Sender: api.HTTPSender("192.0.2.7", "test", "", 0)}
	}
	replies := p.VoteBatch("p", []Request{
		decoded(Vote{Option: "a", Voter: "alice", Idem: "k1"}),
		req(`{"option":"a","voter":"alice","idem":"k1"}`), // the same vote as a body: its retry
		decoded(Vote{Option: "a", Voter: "bob", Idem: ""}),
		decoded(Vote{Option: "a", Voter: "carol", Idem: "k3", Name: strings.Repeat("n", api.MaxNameLen+1)}),
		decoded(make([]Vote, api.MaxBatch+1)...),
		decoded(Vote{Option: "c", Voter: "dave", Idem: "k4"}),
		decoded(Vote{Option: "b", Voter: "erin", Idem: "k5", After: "not a stamp"}),
	})
	if r := replies[0]; r.Err != nil || r.Response.Results[0].Status != StatusAccepted {
		t.Fatalf("decoded vote: %+v", r)
	}
	if r := replies[1]; r.Err != nil || r.Response.Results[0].Status != StatusDuplicate || r.Response.Results[0].VoteID != replies[0].Response.Results[0].VoteID {
		t.Fatalf("its retry as a body: %+v", r)
	}
	want := []string{api.CodeInvalidRequest, api.CodeInvalidRequest, api.CodeInvalidRequest, api.CodeInvalidOption, api.CodeInvalidRequest}
	for i, code := range want {
		if got := errCode(replies[2+i].Err); got != code {
			t.Errorf("request %d: %v, want %s", 2+i, replies[2+i].Err, code)
		}
	}
	if tl, _ := p.cfg.State.Tally("p"); tl.Value("a") != 1 || tl.Value("b") != 0 {
		t.Fatalf("counted a=%d b=%d, want 1 and 0", tl.Value("a"), tl.Value("b"))
	}
}
