package ingest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
	"tally/poll"
	"tally/state"
)

// region is one replica of a two-region test: its own ledger, state,
// clock and pipeline, on a wall clock the test moves.
type region struct {
	replica string
	l       *ledger.Ledger
	st      *state.State
	p       *Pipeline
	ms      *atomic.Int64
}

func newRegion(t *testing.T, replica string, ms *atomic.Int64, def poll.Definition) *region {
	t.Helper()
	now := func() time.Time { return time.UnixMilli(ms.Load()) }
	l, err := ledger.Open(ledger.Config{Dir: replica, FS: vfs.NewMem(), Replica: replica})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	st, err := state.New(state.Config{Replica: replica, Store: l, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	clock, err := hlc.New(hlc.Config{Replica: replica, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Defs.PutPoll(def, hlc.Timestamp{Wall: def.OpensAt, Replica: "admin"}); err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Ledger: l, State: st, Clock: clock, Limits: Limits{MaxBody: 1 << 14}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return &region{replica: replica, l: l, st: st, p: p, ms: ms}
}

// learn gives r every ballot of from's own records (what gossip does).
func (r *region) learn(t *testing.T, from *region) {
	t.Helper()
	bs, err := from.st.BallotsSince("p", from.replica, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, left, err := r.st.MergeBallots("p", bs); err != nil || left != 0 {
		t.Fatalf("%s learning %s's ballots: %d left out, %v", r.replica, from.replica, left, err)
	}
}

func (r *region) vote(t *testing.T, voter, idem string) Result {
	t.Helper()
	res, err := r.p.Submit("p", []Vote{{Option: "a", Voter: voter, Idem: idem}}, "203.0.113.7")
	if err != nil {
		t.Fatalf("vote at %s: %v", r.replica, err)
	}
	return res[0]
}

// certified is the record certification keeps for the key: the earliest
// under it by ledger.Record.After, from every region's ledger.
func certified(t *testing.T, idem string, rs ...*region) *ledger.Record {
	t.Helper()
	var kept *ledger.Record
	for _, r := range rs {
		for rec, err := range r.l.Scan("p") {
			if err != nil {
				t.Fatal(err)
			}
			if rec.Idem == idem && (kept == nil || kept.After(&rec)) {
				kept = &rec
			}
		}
	}
	if kept == nil {
		t.Fatalf("no record of key %q", idem)
	}
	return kept
}

// TestRetryIsAnsweredWithTheCertifiedRecord: one key ledgered at two
// regions (a retry that reached the second before the first's ballot)
// is answered, once each region holds the other's ballot, with the one
// record certification keeps — the earliest by HLC — at both regions:
// the region holding the later record answers with the other's id and
// stamp, not its own (issue 59). Both orders of the regions' names, and
// both stamped in the same millisecond, where the replica id decides.
func TestRetryIsAnsweredWithTheCertifiedRecord(t *testing.T) {
	start := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC).UnixMilli()
	def := poll.Definition{ID: "p", Question: "Q?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: start - 1000, ClosesAt: start + 3600_000, GraceMs: 1000}
	for _, c := range []struct {
		first, second string
		gapMs         int64 // how much later the second region's clock reads
	}{{"eu-1", "us-1", 5}, {"us-1", "eu-1", 5}, {"eu-1", "us-1", 0}, {"us-1", "eu-1", 0}} {
		t.Run(fmt.Sprintf("%s first, %s %d ms later", c.first, c.second, c.gapMs), func(t *testing.T) {
			var earlyMs, lateMs atomic.Int64
			earlyMs.Store(start)
			lateMs.Store(start)
			early, late := newRegion(t, c.first, &earlyMs, def), newRegion(t, c.second, &lateMs, def)

			first := early.vote(t, "v1", "k1")
			lateMs.Add(c.gapMs) // the retry reaches the other region before the first vote's ballot
			second := late.vote(t, "v1", "k1")
			if first.Status != StatusAccepted || second.Status != StatusAccepted || first.VoteID == second.VoteID {
				t.Fatalf("the key at two regions: %+v and %+v, want both accepted with their own ids", first, second)
			}
			kept := certified(t, "k1", early, late)
			want := fmt.Sprintf("duplicate %s %s", ledger.VoteID{Replica: kept.Replica, Seq: kept.Seq}, api.FormatStamp(kept.Wall, kept.Logical))
			if wantAt := map[bool]string{true: c.first, false: min(c.first, c.second)}[c.gapMs > 0]; kept.Replica != wantAt {
				t.Fatalf("certification keeps %s's record, want %s's: the test's clocks are wrong", kept.Replica, wantAt)
			}

			// The ballots spread, in either order at each region.
			late.learn(t, early)
			early.learn(t, late)
			for _, r := range []*region{early, late} {
				for try := range 2 { // a retry of a retry: the same answer
					res := r.vote(t, "v1", "k1")
					if got := fmt.Sprintf("%s %s %s", res.Status, res.VoteID, res.Stamp); got != want {
						t.Errorf("retry %d at %s: %s, want %s (the record certification keeps)", try, r.replica, got, want)
					}
				}
			}
			// Nothing more was ledgered, and the key counts once.
			for _, r := range []*region{early, late} {
				if n, _, err := r.l.Head("p", r.replica); err != nil || n != 1 {
					t.Errorf("%s holds %d records of its own (%v), want 1", r.replica, n, err)
				}
				if b, err := r.st.Ballots("p"); err != nil || b.Totals["a"] != 1 {
					t.Errorf("%s's ballots count %v (%v), want a=1", r.replica, b.Totals, err)
				}
			}
		})
	}
}
