package ingest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tally/hlc"
	"tally/internal/testwait"
	"tally/poll"
)

// Votes in flight while a close is written (issue 59: a vote that read
// the poll before the close was written was stamped past it, ledgered
// counted and answered "accepted"): once the close is written and Settle
// has returned, no request started after is accepted, nothing more is
// counted, and Settle waits for the requests already past their checks.
func TestCloseDecidesEveryVoteAfterSettle(t *testing.T) {
	r := newRig(t, t.TempDir())
	now := time.Now().UnixMilli()
	def := poll.Definition{ID: "c", Question: "Q?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: now - 10_000, ClosesAt: now + 3_600_000, GraceMs: 1000}
	if _, err := r.st.Defs.PutPoll(def, hlc.Timestamp{Wall: now - 10_000, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	var settled atomic.Bool
	var wrong, accepted, afterDone atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for c := range 8 {
		wg.Go(func() {
			for i := 0; i < 2000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				after := settled.Load() // read before the request starts
				key := fmt.Sprintf("k%d-%d", c, i)
				res, err := r.p.Submit("c", []Vote{{Option: "a", Voter: key, Idem: key}}, "127.0.0.1")
				ok := err == nil && res[0].Status == StatusAccepted
				switch {
				case after && ok:
					wrong.Add(1)
				case after:
					afterDone.Add(1)
				case ok:
					accepted.Add(1)
				}
			}
		})
	}
	testwait.For(t, 10*time.Second, "votes accepted before the close", func() bool { return accepted.Load() >= 100 })
	def.ClosesAt = now - 5000 // closed, and its grace over
	if _, err := r.st.Defs.PutPoll(def, hlc.Timestamp{Wall: time.Now().UnixMilli(), Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	r.p.Settle()
	counted := countedRecords(t, r)
	settled.Store(true)
	testwait.For(t, 10*time.Second, "votes sent after the close", func() bool { return afterDone.Load()+wrong.Load() >= 100 })
	close(stop)
	wg.Wait()
	if n := wrong.Load(); n > 0 {
		t.Fatalf("%d votes sent after the close had settled were accepted", n)
	}
	if later := countedRecords(t, r); later != counted {
		t.Fatalf("%d votes were counted after the close had settled (%d then, %d now): a request that read the poll before the close went on under it", later-counted, counted, later)
	}

	// A request past its checks holds the lock Settle takes whole.
	r.p.stamping.RLock()
	done := make(chan struct{})
	go func() { r.p.Settle(); close(done) }()
	select {
	case <-done:
		t.Fatal("Settle returned while a request was past its checks")
	default:
	}
	r.p.stamping.RUnlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Settle did not return once the request was done")
	}
}

// countedRecords is how many records of poll c the rig's ledger holds as
// counted.
func countedRecords(t *testing.T, r *rig) int {
	t.Helper()
	n := 0
	for rec, err := range r.l.Scan("c") {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Counted {
			n++
		}
	}
	return n
}
