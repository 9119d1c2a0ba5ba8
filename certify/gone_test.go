package certify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tally/api"
	"tally/hlc"
	"tally/internal/testwait"
	"tally/ledger"
	"tally/state"
)

// goneRig is a copyRig whose us-1 is still a member, as memberlist lists
// a destroyed node until its failure detection runs out; its node
// answers each read as ans says (nil: it serves its ledger). The
// certifier's monotonic clock is the test's; applied collects what
// Config.Ballots is given.
type goneRig struct {
	*copyRig
	ans     func() error
	mono    time.Time
	mu      sync.Mutex
	applied []ledger.Record
}

func newGoneRig(t *testing.T) *goneRig {
	t.Helper()
	r := &goneRig{copyRig: newCopyRig(t), mono: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)}
	r.c.members.mono = func() time.Time { return r.mono }
	r.c.cfg.Peers = func() []Peer {
		return []Peer{{Name: "n1", Replica: "eu-1", Full: true}, {Name: "n2", Replica: "us-1", Full: true}, {Name: "n3", Replica: "ap-1", Full: true}}
	}
	viaCopies := r.c.cfg.Fetch
	r.c.cfg.Fetch = func(ctx context.Context, p Peer, pollID string, after uint64, fence hlc.Timestamp) (io.ReadCloser, error) {
		if p.Replica == "us-1" && p.CopyOf == "" && r.ans != nil {
			if err := r.ans(); err != nil {
				return nil, err
			}
		}
		return viaCopies(ctx, p, pollID, after, fence)
	}
	r.c.keys.apply = func(recs []ledger.Record) {
		r.mu.Lock()
		r.applied = append(r.applied, recs...)
		r.mu.Unlock()
	}
	return r
}

// connRefused is how a dial to a port nothing listens on fails.
var connRefused = &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}

// errTimedOut is how a read from a frozen process fails.
var errTimedOut = fmt.Errorf("get \"http://us-1/v1/polls/p/ledger\": %w", context.DeadlineExceeded)

// A member whose node refuses every connection for a second is gone: its
// chain is read from its copy, with no operator decision. Before the
// second is over the attempt is pending, naming the refusal.
func TestAMemberThatRefusesConnectionsIsReadFromItsCopy(t *testing.T) {
	r := newGoneRig(t)
	r.ans = func() error { return fmt.Errorf("dial tcp 127.0.0.1:1: %w", connRefused) }
	for range 3 { // refused at 0, 0.4 and 0.8 s: not gone yet
		cert, err := r.c.Certify(context.Background(), "p", Decisions{})
		if !errors.Is(err, ErrIncomplete) || !strings.Contains(cert.Reason, "connection refused") {
			t.Fatalf("at %s: %s %q %v, want pending on the refusal", r.mono.Format(time.StampMilli), cert.Status, cert.Reason, err)
		}
		r.mono = r.mono.Add(400 * time.Millisecond)
	}
	cert, err := r.c.Certify(context.Background(), "p", Decisions{})
	if err != nil || cert.Status != state.Reconciled || cert.Totals["b"] != 7 || cert.Total != 12 {
		t.Fatalf("refused for 1.2 s: %s %v (%s) %v", cert.Status, cert.Totals, cert.Reason, err)
	}
	if src := fromCopy(t, cert); len(src) != 1 || src[0] != (api.CopySource{Replica: "us-1", Holder: "ap-1", Records: 7}) {
		t.Fatalf("from_copy %+v", src)
	}
	if !strings.Contains(r.logged.String(), "its node refuses connections") {
		t.Errorf("the log does not say why the copy was read:\n%s", r.logged)
	}
	// The coordinator holds the copied replica's ballots now.
	if len(r.applied) != 7 || r.applied[0].Replica != "us-1" || r.applied[6].Seq != 7 {
		t.Errorf("ballots applied: %d records, want us-1's 7", len(r.applied))
	}
}

// A member that does not answer in time may be frozen (SIGSTOP) with
// votes it will answer "accepted" when it resumes: it is never read from
// a copy, however long it stays so; and a look that times out ends a
// run of refusals, which then starts again.
func TestAFrozenMemberIsNeverReadFromItsCopy(t *testing.T) {
	r := newGoneRig(t)
	r.ans = func() error { return errTimedOut }
	for range 10 {
		cert, err := r.c.Certify(context.Background(), "p", Decisions{})
		if !errors.Is(err, ErrIncomplete) || len(fromCopy(t, cert)) > 0 {
			t.Fatalf("at %s: %s %q %v, want pending", r.mono.Format(time.StampMilli), cert.Status, cert.Reason, err)
		}
		r.mono = r.mono.Add(500 * time.Millisecond)
	}
	// Refused, then timed out, then refused again: 1.2 s since the first
	// refusal, but the run started again 0.3 s ago.
	for i, ans := range []error{connRefused, connRefused, errTimedOut, connRefused} {
		r.ans = func() error { return ans }
		cert, err := r.c.Certify(context.Background(), "p", Decisions{})
		if !errors.Is(err, ErrIncomplete) {
			t.Fatalf("look %d (%v): %s %v, want pending", i, ans, cert.Status, err)
		}
		r.mono = r.mono.Add(300 * time.Millisecond)
	}
	// And a stale refusal is no proof either: refused 5 s ago, once.
	r.c.members.noteAt("ap-1", connRefused, r.mono.Add(-5*time.Second))
	if r.c.members.gone("ap-1") {
		t.Fatal("one refusal 5 s ago: gone")
	}
	r.c.members.noteAt("ap-1", connRefused, r.mono)
	if r.c.members.gone("ap-1") {
		t.Fatal("a refusal now after one 5 s ago: gone at once")
	}
}

// The next node in a poll's order does not wait its takeover slot when
// the coordinator is gone by its refusals: us-1 ranks first for poll p,
// eu-1 second.
func TestTakeoverPassesOverAGoneCoordinator(t *testing.T) {
	r := newGoneRig(t)
	if order := Order("p", []string{"eu-1", "us-1", "ap-1"}); !slices.Equal(order[:2], []string{"us-1", "eu-1"}) {
		t.Fatalf("order %v: the test wants us-1 then eu-1", order)
	}
	r.c.cfg.Settle, r.c.cfg.TakeoverAfter = time.Millisecond, time.Hour
	due := func() bool { polls, _ := r.c.due(); return slices.Contains(polls, "p") }
	if due() {
		t.Fatal("due at once")
	}
	deadline := time.Now().Add(20 * time.Millisecond)
	testwait.For(t, time.Second, "20 ms", func() bool { return time.Now().After(deadline) })
	if due() {
		t.Fatal("due before the takeover slot, us-1 alive")
	}
	for _, ago := range []time.Duration{1000, 500, 0} { // refused on every look for a second
		r.c.members.noteAt("us-1", connRefused, r.mono.Add(-ago*time.Millisecond))
	}
	if !due() {
		t.Fatal("not due with the coordinator gone")
	}
	if v, _ := r.c.ViewOf("p"); v.Coordinator != "" && v.Coordinator != "n1" {
		t.Errorf("the view names coordinator %q", v.Coordinator)
	}
	// Back: any answer ends the refusals.
	r.c.members.note("us-1", nil)
	if r.c.members.gone("us-1") {
		t.Fatal("gone after an answer")
	}
}

// The watch looks at the members while a poll waits for its certificate:
// a member whose probes are refused for a second is gone; one that
// answers, or whose probes time out, is not.
func TestWatchFindsAGoneMember(t *testing.T) {
	r := newGoneRig(t)
	r.c.members.mono = time.Now
	probe := func(ctx context.Context, p Peer) error {
		switch p.Replica {
		case "us-1":
			return connRefused
		case "ap-1":
			<-ctx.Done() // frozen
			return ctx.Err()
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.c.members.watch(ctx, probe, r.c.awaiting) })
	defer wg.Wait()
	defer cancel()
	testwait.For(t, 5*time.Second, "us-1 gone", func() bool { return r.c.members.gone("us-1") })
	if r.c.members.gone("ap-1") || r.c.members.gone("eu-1") {
		t.Fatal("a frozen member or this node gone")
	}
}

// A node that did not certify holds, once the certificate reaches it, the
// ballots of the replicas it names read from copies: read from the
// holder's copy after the ballots it holds, and only if they end at the
// certified chain head.
func TestBallotsOfACopiedReplicaAtEveryNode(t *testing.T) {
	coord := newCopyRig(t)
	cert, err := coord.c.Certify(context.Background(), "p", Decisions{})
	if err != nil {
		t.Fatal(err)
	}
	r := newGoneRig(t) // another full node, which did not certify; us-1 no longer a member
	r.c.cfg.Peers = coord.c.cfg.Peers
	if _, err := r.st.Defs.PutCertificate(cert); err != nil {
		t.Fatal(err)
	}
	held, _ := r.st.Defs.Certificate("p")
	if held.Status != state.Reconciled {
		t.Fatalf("held %+v", held)
	}

	// A copy that does not end at the certified head is not applied.
	forged := coord.forged()
	r.serveCopy(forged, nil)
	_, copied := r.c.due()
	if !slices.Contains(copied, "p") {
		t.Fatalf("copied %v, want p", copied)
	}
	r.c.copiedBallots(context.Background(), "p")
	if len(r.applied) != 0 || !strings.Contains(r.logged.String(), "does not end at the certified head") {
		t.Fatalf("a forged copy: %d applied; log:\n%s", len(r.applied), r.logged)
	}
	// The genuine one is, once the retry delay has passed.
	r.serveCopy(coord.chain, nil)
	if _, copied := r.c.due(); len(copied) > 0 {
		t.Fatalf("copied %v again before the retry delay", copied)
	}
	r.c.keys.retry = time.Nanosecond
	if _, copied := r.c.due(); !slices.Contains(copied, "p") {
		t.Fatalf("copied %v after the retry delay, want p", copied)
	}
	r.c.copiedBallots(context.Background(), "p")
	if len(r.applied) != 7 || r.applied[0].Seq != 1 || r.applied[6].Hash() != coord.chain[6].Hash() {
		t.Fatalf("applied %d records, want us-1's 7", len(r.applied))
	}
}
