package ingest

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"tally/crdt"
	"tally/hlc"
	"tally/ledger"
	"tally/poll"
	"tally/state"
)

// rig is a pipeline on a real ledger, with a poll "p" open.
type rig struct {
	l  *ledger.Ledger
	st *state.State
	p  *Pipeline
}

func newRig(t *testing.T, dir string) *rig {
	t.Helper()
	l, err := ledger.Open(ledger.Config{Dir: filepath.Join(dir, "ledger"), Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	st, err := state.New(state.Config{Replica: "eu-1", Store: l})
	if err != nil {
		t.Fatal(err)
	}
	clock, err := hlc.New(hlc.Config{Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Defs.Poll("p"); !ok {
		now := time.Now().UnixMilli()
		def := poll.Definition{ID: "p", Question: "Q?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}, {ID: "c", Label: "C"}},
			OpensAt: now - 1000, ClosesAt: now + 3600_000, GraceMs: 1000}
		if _, err := st.Defs.PutPoll(def, hlc.Timestamp{Wall: now, Replica: "eu-1"}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := New(Config{Ledger: l, State: st, Clock: clock, Limits: Limits{MaxBody: 1 << 14}})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{l: l, st: st, p: p}
}

func (r *rig) heads(poll string) (uint64, error) {
	n, _, err := r.l.Head(poll, "eu-1")
	return n, err
}

// memory is what a restart must rebuild: own counts and the ballots
// (replica/seq → ballot).
func (r *rig) memory(t *testing.T) (map[string][2]uint64, uint64, map[string]crdt.Ballot) {
	t.Helper()
	counts, records, err := r.st.OwnCounts("p")
	if err != nil {
		t.Fatal(err)
	}
	all, _, err := r.st.SnapshotBallots("p")
	if err != nil {
		t.Fatal(err)
	}
	voters := map[string]crdt.Ballot{}
	for _, b := range all {
		voters[fmt.Sprintf("%s/%d", b.Replica, b.Seq)] = b
	}
	return counts, records, voters
}

// TestCheckpointUnderConcurrentVotes: checkpoints taken while votes (and
// changes of mind) stream in, plus the ledger records after them, rebuild
// exactly what a full replay rebuilds; after the restore, a vote change
// moves the right counts.
func TestCheckpointUnderConcurrentVotes(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, dir)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := Vote{Option: []string{"a", "b", "c"}[rng.IntN(3)], Voter: fmt.Sprintf("v%d", rng.IntN(40)), Idem: fmt.Sprintf("c%d-%d", c, i)}
				if _, err := r.p.Submit("p", []Vote{v}, "127.0.0.1"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var ckpt []byte
	for range 5 { // checkpoints in the middle of the stream
		var buf bytes.Buffer
		if _, _, err := r.p.WriteCheckpoint(&buf, r.heads); err != nil {
			t.Fatal(err)
		}
		ckpt = buf.Bytes()
		time.Sleep(20 * time.Millisecond) // let votes arrive between checkpoints (pacing, not a wait)
	}
	close(stop)
	wg.Wait()
	wantCounts, wantRecords, wantVoters := r.memory(t)
	if wantRecords < 10 {
		t.Fatalf("only %d records", wantRecords)
	}

	// A fresh pipeline on the same ledger: checkpoint + tail.
	fresh := newRig2(t, r)
	applied, err := fresh.st.LoadCheckpoint(bytes.NewReader(ckpt), r.heads)
	if err != nil {
		t.Fatal(err)
	}
	if applied["p"] == 0 || applied["p"] >= wantRecords {
		t.Fatalf("checkpoint covers %d of %d records: not taken mid-stream", applied["p"], wantRecords)
	}
	n, err := fresh.p.Replay(r.l.ReplayAfter("eu-1", applied), "eu-1")
	if err != nil {
		t.Fatal(err)
	}
	if uint64(n)+applied["p"] != wantRecords {
		t.Fatalf("tail %d + checkpoint %d != %d records", n, applied["p"], wantRecords)
	}
	gotCounts, gotRecords, gotVoters := fresh.memory(t)
	// Counts compare as values: P and N depend on the order changes of
	// mind were applied in (live: as acks came back; replay: by sequence),
	// the count P-N does not (and state.Merge lifts the cells above what
	// the cluster still holds, see state's lift).
	if !maps.Equal(values(gotCounts), values(wantCounts)) || gotRecords != wantRecords || !maps.Equal(gotVoters, wantVoters) {
		t.Fatalf("restored counts %v records %d (%d ballots); want %v %d (%d ballots)", gotCounts, gotRecords, len(gotVoters), wantCounts, wantRecords, len(wantVoters))
	}
	// A retry of a vote from before the checkpoint is still a duplicate.
	// A retry of a vote from before the checkpoint is still a duplicate;
	// the key is still known to belong to its voter.
	voter := ""
	for rec, err := range r.l.Scan("p") {
		if err == nil && rec.Idem == "c0-0" {
			voter = rec.Voter
		}
	}
	res, err := fresh.p.Submit("p", []Vote{{Option: "a", Voter: voter, Idem: "c0-0"}}, "127.0.0.1")
	if err != nil || res[0].Status != StatusDuplicate {
		t.Fatalf("retry after restore: %+v %v", res, err)
	}
	res, err = fresh.p.Submit("p", []Vote{{Option: "a", Voter: voter + "-other", Idem: "c0-0"}}, "127.0.0.1")
	if err != nil || res[0].Status != StatusRejected {
		t.Fatalf("another voter's reuse after restore: %+v %v", res, err)
	}
}

// newRig2 is a second pipeline over r's ledger and a fresh state (a restart).
func newRig2(t *testing.T, r *rig) *rig {
	t.Helper()
	st, err := state.New(state.Config{Replica: "eu-1", Store: r.l})
	if err != nil {
		t.Fatal(err)
	}
	clock, _ := hlc.New(hlc.Config{Replica: "eu-1"})
	p, err := New(Config{Ledger: r.l, State: st, Clock: clock, Limits: Limits{MaxBody: 1 << 14}})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{l: r.l, st: st, p: p}
}

func values(counts map[string][2]uint64) map[string]int64 {
	out := map[string]int64{}
	for o, pn := range counts {
		out[o] = int64(pn[0]) - int64(pn[1])
	}
	return out
}
