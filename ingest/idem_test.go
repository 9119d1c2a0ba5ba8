package ingest

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"tally/api"
	"tally/ledger"
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

// failingCopier is a ledger.Copier whose second machine is away while
// down is set.
type failingCopier struct{ down atomic.Bool }

func (c *failingCopier) Copy([]ledger.Record) error {
	if c.down.Load() {
		return errors.New("no buddy")
	}
	return nil
}

// TestANotCopiedVoteIsNeverCalledNotTaken: a vote ledgered whose copy
// failed is answered 504 outcome_unknown, and so is its retry while no
// buddy is there — never 503 no_copy, whose "it was not taken" would be
// false: it counts. A new key meanwhile is refused with no_copy and
// nothing of it is ledgered; once a buddy is back the retry is answered
// duplicate, with the first answer's id.
func TestANotCopiedVoteIsNeverCalledNotTaken(t *testing.T) {
	dir := t.TempDir()
	copier := &failingCopier{}
	l, err := ledger.Open(ledger.Config{Dir: filepath.Join(dir, "ledger"), Replica: "eu-1", Copier: copier})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r := newRig(t, dir+"-state") // its state, clock and poll "p"; the ledger is ours
	ready := true
	p, err := New(Config{Ledger: l, State: r.st, Clock: r.p.cfg.Clock, Limits: Limits{MaxBody: 1 << 14},
		CopyReady: func() bool { return ready }})
	if err != nil {
		t.Fatal(err)
	}
	code := func(err error) string {
		var e *api.Error
		if errors.As(err, &e) {
			return fmt.Sprintf("%d %s", e.Status, e.Code)
		}
		return fmt.Sprint(err)
	}
	copier.down.Store(true)
	if _, err := p.Submit("p", []Vote{{Voter: "v1", Option: "a", Idem: "k1"}}, "203.0.113.7"); code(err) != "504 outcome_unknown" {
		t.Fatalf("a vote whose copy failed: %s", code(err))
	}
	ready = false // the node now knows no buddy is there
	if _, err := p.Submit("p", []Vote{{Voter: "v1", Option: "a", Idem: "k1"}}, "203.0.113.7"); code(err) != "504 outcome_unknown" {
		t.Fatalf("its retry with no buddy: %s, want 504 outcome_unknown (it is ledgered)", code(err))
	}
	if _, err := p.Submit("p", []Vote{{Voter: "v2", Option: "b", Idem: "k2"}}, "203.0.113.8"); code(err) != "503 no_copy" {
		t.Fatalf("a new vote with no buddy: %s, want 503 no_copy", code(err))
	}
	if _, found, _ := l.Lookup("p", "k2"); found {
		t.Fatal("the vote refused with no_copy is ledgered")
	}
	ready = true
	copier.down.Store(false)
	res, err := p.Submit("p", []Vote{{Voter: "v1", Option: "a", Idem: "k1"}}, "203.0.113.7")
	if err != nil || res[0].Status != StatusDuplicate || res[0].VoteID != "eu-1/1" {
		t.Fatalf("the retry once a buddy is back: %+v %v, want duplicate eu-1/1", res, err)
	}
}
