package certify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tally/api"
	"tally/crdt"
	"tally/hlc"
	"tally/ledger"
	"tally/poll"
	"tally/state"
)

// prefetchRig is a certifier of replica eu-1 over real ledgers: its own and
// two peers' (us-1, ap-1), whose exports its Fetch reads as a node's
// handler writes them, counting the records each fetch hands over.
type prefetchRig struct {
	t       *testing.T
	now     time.Time
	st      *state.State
	c       *Certifier
	ledgers map[string]*ledger.Ledger
	def     poll.Definition
	sent    atomic.Int64 // records the peers' exports handed over
	whole   bool         // the peers export whole chains, whatever after says
	mu      sync.Mutex
	fences  map[string][]hlc.Timestamp // replica → the fences its reads came with (zero: none)
}

func newPrefetchRig(t *testing.T, budget int) *prefetchRig {
	t.Helper()
	r := &prefetchRig{t: t, now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), ledgers: map[string]*ledger.Ledger{}, fences: map[string][]hlc.Timestamp{}}
	for _, rep := range []string{"eu-1", "us-1", "ap-1"} {
		l, err := ledger.Open(ledger.Config{Dir: "l", FS: vfs.NewMem(), Replica: rep})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		r.ledgers[rep] = l
	}
	var err error
	if r.st, err = state.New(state.Config{Replica: "eu-1", Store: r.ledgers["eu-1"]}); err != nil {
		t.Fatal(err)
	}
	clock, err := hlc.New(hlc.Config{Replica: "eu-1", Now: func() time.Time { return r.now }})
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := clock.Now()
	r.def = poll.Definition{ID: "p", Question: "Q?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: r.now.Add(-time.Minute).UnixMilli(), ClosesAt: r.now.Add(time.Minute).UnixMilli()}
	if _, err := r.st.Defs.PutPoll(r.def, ts); err != nil {
		t.Fatal(err)
	}
	r.c, err = New(Config{
		State: r.st, Ledger: r.ledgers["eu-1"], Replica: "eu-1", Name: "n1", Full: true, Clock: clock, Registerer: prometheus.NewRegistry(),
		Prefetch: budget,
		Peers: func() []Peer {
			return []Peer{{Name: "n1", Replica: "eu-1", Full: true}, {Name: "n2", Replica: "us-1", Full: true}, {Name: "n3", Replica: "ap-1", Full: true}}
		},
		Fence: func(string, int64) error {
			ts, _ := clock.Now() // the own ledger is fenced in-process: recorded at the rig's time
			r.fenced("eu-1", ts)
			return nil
		},
		Fetch: func(_ context.Context, p Peer, pollID string, after uint64, fence hlc.Timestamp) (io.ReadCloser, error) {
			r.fenced(p.Replica, fence)
			var buf bytes.Buffer
			l := r.ledgers[p.Replica]
			if l == nil {
				return nil, errors.New("connection refused")
			}
			if r.whole {
				after = 0 // an export from a node of an earlier version: the whole chain
			}
			n, err := l.ExportStreamAfter(&buf, pollID, p.Replica, after)
			r.sent.Add(int64(n))
			return io.NopCloser(&buf), err
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:    func() time.Time { return r.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *prefetchRig) fenced(replica string, ts hlc.Timestamp) {
	r.mu.Lock()
	r.fences[replica] = append(r.fences[replica], ts)
	r.mu.Unlock()
}

// vote appends n votes to replica's ledger and reports its count as
// gossip would.
func (r *prefetchRig) vote(replica string, n int, option string) {
	r.t.Helper()
	head, _, _ := r.ledgers[replica].Head("p", replica)
	for i := range n {
		v := fmt.Sprintf("%s-v%d", replica, int(head)+i)
		rec := ledger.Record{Poll: "p", Voter: v, Option: option, Idem: v, Wall: r.def.OpensAt + int64(head) + int64(i) + 1, Trust: 1, Counted: true}
		if _, err := r.ledgers[replica].Append(rec); err != nil {
			r.t.Fatal(err)
		}
	}
	r.setCount(replica)
}

func (r *prefetchRig) setCount(replica string) {
	r.t.Helper()
	n, _, _ := r.ledgers[replica].Head("p", replica)
	if replica == "eu-1" {
		held, _, _ := r.st.OwnRecords("p")
		if err := r.st.AddRecords("p", n-held); err != nil {
			r.t.Fatal(err)
		}
		return
	}
	d := crdt.NewTally()
	d.AddRecords(replica, n)
	if _, err := r.st.Merge("p", d); err != nil {
		r.t.Fatal(err)
	}
}

func (r *prefetchRig) certify() state.Certificate {
	r.t.Helper()
	cert, err := r.c.Certify(context.Background(), "p", Decisions{})
	if err != nil {
		r.t.Fatalf("certify: %v", err)
	}
	return cert
}

// While a poll runs the copies follow the gossiped counts, each record
// fetched once; at close only the tail is read, and the result is the one
// a certifier without copies computes from the whole ledgers.
func TestPrefetchReadsEachRecordOnceAndChangesNoResult(t *testing.T) {
	r := newPrefetchRig(t, 1000)
	r.vote("eu-1", 5, "a")
	r.vote("us-1", 7, "b")
	r.vote("ap-1", 3, "a")
	r.c.prefetchOnce(context.Background())
	if got := r.c.copies.size(); got != 15 {
		t.Fatalf("copies after the first top-up: %d records, want 15", got)
	}
	r.vote("us-1", 4, "a")
	r.c.prefetchOnce(context.Background())
	r.c.prefetchOnce(context.Background()) // nothing new: nothing fetched
	if got := r.c.copies.size(); got != 19 {
		t.Fatalf("copies after the second: %d, want 19", got)
	}
	// Each top-up hands back the last record copied (to prove the peer
	// still holds it) and the new ones: 7+3, then 1+4.
	if r.sent.Load() != 15 {
		t.Fatalf("peers handed over %d records, want 15", r.sent.Load())
	}
	r.vote("ap-1", 2, "b") // the tail, after the last top-up
	r.now = time.UnixMilli(r.def.GraceEnd() + 1)
	cert := r.certify()
	// The copies while the poll ran came unfenced; at close every replica,
	// this node's own included, was read after a fence past the grace.
	for _, rep := range []string{"eu-1", "us-1", "ap-1"} {
		fs := r.fences[rep]
		if len(fs) == 0 || fs[len(fs)-1].Wall < r.def.GraceEnd() {
			t.Fatalf("%s read at close without a fence past the grace: %v", rep, fs)
		}
		for _, f := range fs[:len(fs)-1] {
			if !f.IsZero() {
				t.Fatalf("%s: a fence while the poll ran: %v", rep, fs)
			}
		}
	}
	if r.sent.Load() != 15+3+1 {
		t.Fatalf("at close the peers handed over %d records in all, want 19 (the tail and one each)", r.sent.Load())
	}

	// The same ledgers certified by a certifier that copied nothing.
	fresh := newPrefetchRig(t, 0)
	fresh.ledgers, fresh.st = r.ledgers, r.st
	fresh.c.cfg.State, fresh.c.cfg.Ledger = r.st, r.ledgers["eu-1"]
	fresh.now = r.now
	again, err := fresh.c.Certify(context.Background(), "p", Decisions{})
	if err != nil || again.Digest != cert.Digest || cert.Total != 21 {
		t.Fatalf("with copies: total %d digest %s; without: %+v %v", cert.Total, cert.Digest, again, err)
	}
	if n := r.c.copies.size(); n != 0 {
		t.Fatalf("a certified poll's copies are kept: %d records", n)
	}
	if inc, whole := merges(r), merges(fresh); inc != [2]float64{1, 0} || whole != [2]float64{0, 1} {
		t.Fatalf("merges (incremental, whole): with copies %v, want one incremental; without %v, want one whole", inc, whole)
	}
}

// merges is how many incremental and whole merges the rig's certifier made.
func merges(r *prefetchRig) [2]float64 {
	return [2]float64{testutil.ToFloat64(r.c.merges.WithLabelValues("incremental")), testutil.ToFloat64(r.c.merges.WithLabelValues("whole"))}
}

// The merge kept while the poll runs gives the certificate a certifier
// without copies gives, with retries reaching two regions (the earlier
// copy stands whichever region's chain was copied first), voters changing
// their minds in another region, late and shadowed votes; and a decision
// that leaves a replica out is merged whole.
func TestIncrementalMergeMatchesAWholeOne(t *testing.T) {
	// night: the votes, with the copies topped up twice while they come.
	night := func(r *prefetchRig) {
		add := func(replica, voter, option, idem string, wall int64, counted bool) {
			t.Helper()
			rec := ledger.Record{Poll: "p", Voter: voter, Option: option, Idem: idem, Wall: r.def.OpensAt + wall, Trust: 1, Counted: counted}
			if !counted {
				rec.Trust = 0.05
			}
			if rec.Wall >= r.def.ClosesAt { // as its node ledgers a vote in the grace window
				rec.Late, rec.Counted = true, false
			}
			if _, err := r.ledgers[replica].Append(rec); err != nil {
				t.Fatal(err)
			}
			r.setCount(replica)
		}
		add("us-1", "v1", "a", "k1", 10, true)
		add("ap-1", "v2", "b", "k2", 11, true)
		r.c.prefetchOnce(context.Background())
		add("eu-1", "v1", "a", "k1", 5, true)   // the same vote, earlier, copied later: it stands
		add("eu-1", "v2", "a", "k3", 20, true)  // v2 changes its mind in another region
		add("us-1", "v3", "b", "k4", 12, false) // shadowed
		r.c.prefetchOnce(context.Background())
		add("ap-1", "v3", "a", "k5", 13, true)
		add("us-1", "v4", "a", "k6", 2*time.Minute.Milliseconds()+1, true) // in the grace window: late
		r.now = time.UnixMilli(r.def.GraceEnd() + 1)
	}
	r := newPrefetchRig(t, 1000)
	night(r)
	cert := r.certify()

	fresh := newPrefetchRig(t, 0)
	fresh.ledgers, fresh.st = r.ledgers, r.st
	fresh.c.cfg.State, fresh.c.cfg.Ledger = r.st, r.ledgers["eu-1"]
	fresh.now = r.now
	again, err := fresh.c.Certify(context.Background(), "p", Decisions{})
	if err != nil || again.Digest != cert.Digest {
		t.Fatalf("incremental: %s\nwhole: %s %v", cert.Detail, again.Detail, err)
	}
	if res := result(t, cert); cert.Totals["a"] != 3 || cert.Total != 3 || res.Duplicates != 1 || res.Late != 1 || res.Shadowed != 1 || res.Records != 7 {
		t.Fatalf("certified %s", cert.Detail)
	}
	if merges(r) != [2]float64{1, 0} {
		t.Fatalf("merges (incremental, whole) %v, want one incremental", merges(r))
	}

	// Leaving us-1 out: the merge holds its records, so the attempt merges
	// what it collected whole.
	r = newPrefetchRig(t, 1000)
	night(r)
	excl, err := r.c.Certify(context.Background(), "p", Decisions{Exclude: []api.Exclusion{{Replica: "us-1", Reason: "test"}}})
	if err != nil || result(t, excl).Records != 4 || merges(r) != [2]float64{0, 1} {
		t.Fatalf("us-1 left out: %s %v; merges %v, want one whole", excl.Detail, err, merges(r))
	}
}

func result(t *testing.T, cert state.Certificate) *ledger.Result {
	t.Helper()
	var detail api.ResultDetail
	if err := json.Unmarshal(cert.Detail, &detail); err != nil || detail.Result == nil {
		t.Fatalf("certificate detail %s: %v", cert.Detail, err)
	}
	return detail.Result
}

// The budget bounds what the prefetch holds; what it did not copy is read
// at close, and the result is the same.
func TestPrefetchKeepsToItsBudget(t *testing.T) {
	r := newPrefetchRig(t, 2)
	r.vote("us-1", 6, "a")
	r.vote("ap-1", 6, "b")
	for range 3 {
		r.c.prefetchOnce(context.Background())
	}
	if got := r.c.copies.size(); got != 2 {
		t.Fatalf("copies hold %d records, budget 2", got)
	}
	r.now = time.UnixMilli(r.def.GraceEnd() + 1)
	if cert := r.certify(); cert.Total != 12 {
		t.Fatalf("certified %d, want 12", cert.Total)
	}
	if merges(r) != [2]float64{0, 1} {
		t.Fatalf("merges (incremental, whole) %v: a tail longer than the merge is merged whole", merges(r))
	}
}

// A replica that no longer holds what was copied of it (restored from an
// older backup, then new votes at the same seqs) is read whole again in
// the same attempt: the certificate says what its ledger says, as an
// auditor's merge of the ledgers would, and never holds records no ledger
// has.
func TestPrefetchDropsACopyItsReplicaNoLongerHolds(t *testing.T) {
	r := newPrefetchRig(t, 1000)
	r.vote("us-1", 4, "a")
	r.c.prefetchOnce(context.Background())
	// us-1 is restored from a backup holding two records, and takes two
	// other votes as seq 3 and 4.
	fs := vfs.NewMem()
	restored, err := ledger.Open(ledger.Config{Dir: "l", FS: fs, Replica: "us-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	var first []ledger.Record
	for rec, err := range r.ledgers["us-1"].Scan("p") {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Seq <= 2 {
			first = append(first, rec)
		}
	}
	if _, err := restored.Import(func(yield func(ledger.Record, error) bool) {
		for _, rec := range first {
			if !yield(rec, nil) {
				return
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	r.ledgers["us-1"] = restored
	for i := range 2 {
		v := fmt.Sprint("other-", i)
		if _, err := restored.Append(ledger.Record{Poll: "p", Voter: v, Option: "b", Idem: v, Wall: r.def.OpensAt + 100, Trust: 1, Counted: true}); err != nil {
			t.Fatal(err)
		}
	}
	r.setCount("us-1")
	r.now = time.UnixMilli(r.def.GraceEnd() + 1)
	cert := r.certify() // read whole at once: what its ledger holds now
	if cert.Totals["a"] != 2 || cert.Totals["b"] != 2 {
		t.Fatalf("certified %v, want us-1's ledger as it is (a 2, b 2)", cert.Totals)
	}
	if merges(r) != [2]float64{0, 1} {
		t.Fatalf("merges (incremental, whole) %v: the merge held the dropped copy's records", merges(r))
	}
}

// The prefetch's figures are on the registry.
func TestPrefetchMetrics(t *testing.T) {
	r := newPrefetchRig(t, 1000)
	r.vote("us-1", 3, "a")
	r.c.prefetchOnce(context.Background())
	delete(r.ledgers, "us-1") // its exports fail from now on
	d := crdt.NewTally()
	d.AddRecords("us-1", 5)
	if _, err := r.st.Merge("p", d); err != nil {
		t.Fatal(err)
	}
	r.c.prefetchOnce(context.Background())
	if n := testutil.ToFloat64(r.c.prefetchErrors); n != 1 {
		t.Fatalf("prefetch errors counted: %v, want 1", n)
	}
}
