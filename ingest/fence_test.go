package ingest

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"tally/api"
	"tally/hlc"
	"tally/internal/testwait"
	"tally/poll"
)

// After a fence at a time past a poll's grace, the node takes no vote for
// it, even though its own clock is still inside the poll's window: the
// votes it stamps order after the fence. Before the fence it took them.
func TestFenceClosesThePollAtItsTime(t *testing.T) {
	r := newRig(t, t.TempDir())
	now := time.Now().UnixMilli()
	def := poll.Definition{ID: "f", Question: "Q?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: now - 1000, ClosesAt: now + 2000, GraceMs: 1000}
	if _, err := r.st.PutPoll(def, hlc.Timestamp{Wall: now, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.p.Submit("f", []Vote{{Option: "a", Voter: "v1", Idem: "k1"}}, "127.0.0.1"); err != nil || res[0].Status != StatusAccepted {
		t.Fatalf("before the fence: %+v %v", res, err)
	}
	if err := r.p.Fence(hlc.Timestamp{Wall: def.GraceEnd() + 1, Replica: "us-1"}); err != nil {
		t.Fatal(err)
	}
	_, err := r.p.Submit("f", []Vote{{Option: "b", Voter: "v2", Idem: "k2"}}, "127.0.0.1")
	var e *api.Error
	if !errors.As(err, &e) || e.Code != api.CodePollClosed || e.Status != http.StatusConflict {
		t.Fatalf("a vote after the fence: %v, want 409 poll_closed", err)
	}
	// A retry of a vote the node took before the fence still gets its answer.
	if res, err := r.p.Submit("f", []Vote{{Option: "a", Voter: "v1", Idem: "k1"}}, "127.0.0.1"); err != nil || res[0].Status != StatusDuplicate {
		t.Fatalf("a retry after the fence: %+v %v", res, err)
	}
}

// A fence too far ahead of the node's clock is refused and moves nothing.
func TestFenceRefusesATimeFarAhead(t *testing.T) {
	r := newRig(t, t.TempDir())
	far := hlc.Timestamp{Wall: time.Now().Add(time.Hour).UnixMilli(), Replica: "us-1"}
	if err := r.p.Fence(far); !errors.Is(err, hlc.ErrSkew) {
		t.Fatalf("a fence an hour ahead: %v, want hlc.ErrSkew", err)
	}
	if res, err := r.p.Submit("p", []Vote{{Option: "a", Voter: "v1", Idem: "k1"}}, "127.0.0.1"); err != nil || res[0].Status != StatusAccepted {
		t.Fatalf("a vote after a refused fence: %+v %v", res, err)
	}
}

// A fence returns only once the requests already past their checks have
// reached the ledger: it waits for them, and they are not refused.
func TestFenceWaitsForRequestsInFlight(t *testing.T) {
	r := newRig(t, t.TempDir())
	r.p.stamping.RLock() // a request between its checks and its append
	ts := hlc.Timestamp{Wall: time.Now().UnixMilli() + 1000, Replica: "us-1"}
	done := make(chan error, 1)
	go func() { done <- r.p.Fence(ts) }()
	testwait.For(t, 10*time.Second, "the fence to fold its time into the clock", func() bool { return !r.p.cfg.Clock.Last().Less(ts) })
	select {
	case err := <-done:
		t.Fatalf("the fence returned (%v) with a request in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	r.p.stamping.RUnlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
