package ingest

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"tally/api"
	"tally/poll"
)

// TestIdemKeyBelongsToItsVoter: a key reused by another voter does not
// swallow their vote as the first voter's duplicate: it is refused with
// idem_conflict (nothing ledgered, nothing counted), the same voter's retry
// is still a duplicate, and the second voter's vote with a key of its own
// counts (issue 25, item 5).
func TestIdemKeyBelongsToItsVoter(t *testing.T) {
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	p0 := poll.Definition{ID: "p", Question: "Q?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: now.Add(-time.Minute).UnixMilli(), ClosesAt: now.Add(time.Hour).UnixMilli()}
	p, l := quizPipeline(t, now, time.Second, nil, p0)
	first, err := p.Submit("p", []Vote{{Option: "a", Voter: "alice", Idem: "k1"}}, "192.0.2.1")
	if err != nil || first[0].Status != StatusAccepted {
		t.Fatalf("alice: %+v %v", first, err)
	}
	for _, batch := range [][]Vote{
		{{Option: "b", Voter: "bob", Idem: "k1"}},
		{{Option: "b", Voter: "bob", Idem: "k1"}, {Option: "b", Voter: "carol", Idem: "k3"}},
	} {
		res, err := p.Submit("p", batch, "192.0.2.2")
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Status != StatusRejected || res[0].Error != api.CodeIdemConflict || res[0].VoteID != "" {
			t.Fatalf("bob reusing alice's key: %+v", res[0])
		}
	}
	// Each refusal counted once, with its reason.
	if got, unnamed := testutil.ToFloat64(p.m.votes.WithLabelValues(StatusRejected, api.CodeIdemConflict)), testutil.ToFloat64(p.m.votes.WithLabelValues(StatusRejected, "")); got != 2 || unnamed != 0 {
		t.Fatalf("idem_conflict counted %v times (and %v without a reason), want 2 and 0", got, unnamed)
	}
	if res, _ := p.Submit("p", []Vote{{Option: "a", Voter: "alice", Idem: "k1"}}, "192.0.2.1"); res[0].Status != StatusDuplicate || res[0].VoteID != first[0].VoteID {
		t.Fatalf("alice's retry: %+v", res[0])
	}
	if res, _ := p.Submit("p", []Vote{{Option: "b", Voter: "bob", Idem: "k2"}}, "192.0.2.2"); res[0].Status != StatusAccepted {
		t.Fatalf("bob with his own key: %+v", res[0])
	}
	records := map[string]int{}
	for r, err := range l.Scan("p") {
		if err != nil {
			t.Fatal(err)
		}
		records[r.Voter]++
	}
	if records["alice"] != 1 || records["bob"] != 1 || records["carol"] != 1 {
		t.Fatalf("ledgered: %v", records)
	}
	tl, _ := p.cfg.State.Tally("p")
	if tl.Value("a") != 1 || tl.Value("b") != 2 {
		t.Fatalf("counts a=%d b=%d, want 1 and 2", tl.Value("a"), tl.Value("b"))
	}
}

// TestCatchingUpHoldsBackNewVotes: while the node catches up after a
// start, a new vote is 503 with Retry-After and a retry of a known key is
// answered as ever.
func TestCatchingUpHoldsBackNewVotes(t *testing.T) {
	r := newRig(t, t.TempDir())
	if res, err := r.p.Submit("p", []Vote{{Voter: "v1", Option: "a", Idem: "k1"}}, "203.0.113.7"); err != nil || res[0].Status != StatusAccepted {
		t.Fatalf("first vote: %+v %v", res, err)
	}
	catching := true
	p, err := New(Config{Ledger: r.l, State: r.st, Clock: r.p.cfg.Clock, Limits: Limits{MaxBody: 1 << 14}, CatchingUp: func() bool { return catching }})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := p.Submit("p", []Vote{{Voter: "v1", Option: "a", Idem: "k1"}}, "203.0.113.7"); err != nil || res[0].Status != StatusDuplicate {
		t.Fatalf("a retry while catching up: %+v %v", res, err)
	}
	_, err = p.Submit("p", []Vote{{Voter: "v2", Option: "b", Idem: "k2"}}, "203.0.113.7")
	var e *api.Error
	if !errors.As(err, &e) || e.Status != 503 || e.Code != api.CodeUnavailable || e.RetryAfter <= 0 {
		t.Fatalf("a new vote while catching up: %v", err)
	}
	catching = false
	if res, err := p.Submit("p", []Vote{{Voter: "v2", Option: "b", Idem: "k2"}}, "203.0.113.7"); err != nil || res[0].Status != StatusAccepted {
		t.Fatalf("the same vote once caught up: %+v %v", res, err)
	}
}
