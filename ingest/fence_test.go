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

// After a fence the node takes no new vote for that poll (as past its
// grace), even though its own clock is still inside the poll's window, and
// a restart keeps the fence; other polls and retries are untouched.
func TestFenceClosesThePollHereOnly(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, dir)
	now := time.Now().UnixMilli()
	def := poll.Definition{ID: "f", Question: "Q?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: now - 1000, ClosesAt: now + 3_600_000, GraceMs: 1000}
	if _, err := r.st.Defs.PutPoll(def, hlc.Timestamp{Wall: now, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.p.Submit("f", []Vote{{Option: "a", Voter: "v1", Idem: "k1"}}, "127.0.0.1"); err != nil || res[0].Status != StatusAccepted {
		t.Fatalf("before the fence: %+v %v", res, err)
	}
	if err := r.p.Fence("f", def.GraceEnd()); err != nil {
		t.Fatal(err)
	}
	refused := func(p *Pipeline) {
		t.Helper()
		_, err := p.Submit("f", []Vote{{Option: "b", Voter: "v2", Idem: "k2"}}, "127.0.0.1")
		var e *api.Error
		if !errors.As(err, &e) || e.Code != api.CodePollClosed || e.Status != http.StatusConflict {
			t.Fatalf("a vote after the fence: %v, want 409 poll_closed", err)
		}
	}
	refused(r.p)
	// A retry of a vote the node took before the fence still gets its answer.
	if res, err := r.p.Submit("f", []Vote{{Option: "a", Voter: "v1", Idem: "k1"}}, "127.0.0.1"); err != nil || res[0].Status != StatusDuplicate {
		t.Fatalf("a retry after the fence: %+v %v", res, err)
	}
	// Another poll takes votes as before.
	if res, err := r.p.Submit("p", []Vote{{Option: "a", Voter: "v3", Idem: "k3"}}, "127.0.0.1"); err != nil || res[0].Status != StatusAccepted {
		t.Fatalf("another poll after the fence: %+v %v", res, err)
	}
	// A restart on the same ledger keeps the fence.
	refused(newRig2(t, r).p)
	// A poll extended past the fence takes votes again: the fence covered
	// the close it was taken under.
	def.ClosesAt += 60_000
	if _, err := r.st.Defs.PutPoll(def, hlc.Timestamp{Wall: now + 1, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.p.Submit("f", []Vote{{Option: "b", Voter: "v4", Idem: "k4"}}, "127.0.0.1"); err != nil || res[0].Status != StatusAccepted {
		t.Fatalf("after an extension past the fence: %+v %v", res, err)
	}
}

// A fence returns only once the requests already past their checks have
// reached the ledger: it waits for them.
func TestFenceWaitsForRequestsInFlight(t *testing.T) {
	r := newRig(t, t.TempDir())
	r.p.stamping.RLock() // a request between its checks and its append
	done := make(chan error, 1)
	go func() { done <- r.p.Fence("p", time.Now().Add(time.Hour).UnixMilli()) }()
	testwait.For(t, 10*time.Second, "the fence to mark the poll", func() bool { v, _ := r.p.fenced.Load("p"); w, _ := v.(int64); return w > 0 })
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
