package state

import (
	"fmt"
	"iter"
	"maps"
	"testing"

	"pgregory.net/rapid"

	"tally/crdt"
	"tally/hlc"
	"tally/ledger"
)

// TestLiveTallyIsExactAfterQuiescence is issue 14's property, on the
// node's real state: three replicas take votes, changes of mind and
// retries at random (some shadowed or late); ballots travel between them
// in any order, some twice, some late; counters are exchanged by merge at
// random moments (the CRDT path, lift included); replicas restart at
// random and rebuild from their own ledger alone, or from a checkpoint
// (ballots and counters snapshotted together). Once every ballot has
// reached every replica and the counters have been exchanged, every
// replica's live tally equals ledger.Reconcile over all ledgers.
func TestLiveTallyIsExactAfterQuiescence(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		replicas := []string{"ap-1", "eu-1", "us-1"}
		options := []string{"red", "blue"}
		d := def("p")
		fresh := func(rep string) *State {
			s, err := New(Config{Replica: rep})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Defs.PutPoll(d, hlc.Timestamp{Wall: 1, Replica: "eu-1"}); err != nil {
				t.Fatal(err)
			}
			return s
		}
		states := map[string]*State{}
		for _, r := range replicas {
			states[r] = fresh(r)
		}
		type checkpoint struct {
			ballots []crdt.Ballot
			counts  map[string][2]uint64
			taken   int // own records covered
		}
		chains := map[string][]ledger.Record{}
		ckpts := map[string]*checkpoint{}
		var sent []crdt.Ballot // every ballot taken anywhere
		ballotOf := func(s *State, r *ledger.Record) crdt.Ballot {
			return crdt.Ballot{Replica: r.Replica, Seq: r.Seq, Wall: r.Wall, Logical: r.Logical, Voter: s.Hash(r.Voter), Idem: s.Hash(r.Idem),
				Option: r.Option, Eligible: r.Counted && !r.Late}
		}
		type req struct{ voter, option, idem string }
		var history []req
		clock := d.OpensAt
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for i := range steps {
			switch rapid.IntRange(0, 5).Draw(t, "action") {
			case 0, 1: // a vote (or a retry) at some replica
				rep := rapid.SampledFrom(replicas).Draw(t, "at")
				v := req{fmt.Sprintf("v%d", rapid.IntRange(0, 4).Draw(t, "voter")), rapid.SampledFrom(options).Draw(t, "option"), fmt.Sprintf("k%d", i)}
				if len(history) > 0 && rapid.IntRange(0, 3).Draw(t, "retry?") == 0 {
					v = history[rapid.IntRange(0, len(history)-1).Draw(t, "retried")]
				}
				history = append(history, v)
				dup := false
				for _, r := range chains[rep] {
					dup = dup || r.Idem == v.idem
				}
				if dup {
					continue // the replica's own index answers duplicate
				}
				clock += int64(rapid.IntRange(0, 3).Draw(t, "tick"))
				r := ledger.Record{Poll: "p", Replica: rep, Seq: uint64(len(chains[rep]) + 1), Wall: clock, Logical: uint32(i),
					Voter: v.voter, Option: v.option, Idem: v.idem, Trust: 1, Counted: true, IPHash: "00"}
				if rapid.IntRange(0, 9).Draw(t, "shadowed?") == 0 {
					r.Counted, r.Trust = false, 0.1
				}
				if n := len(chains[rep]); n > 0 {
					r.Prev = chains[rep][n-1].Hash()
				}
				chains[rep] = append(chains[rep], r)
				s := states[rep]
				s.AddRecords("p", 1)
				b := ballotOf(s, &r)
				if err := s.Vote("p", b); err != nil {
					t.Fatal(err)
				}
				sent = append(sent, b)
			case 2: // one ballot reaches one replica (late, again, or first)
				if len(sent) == 0 {
					continue
				}
				b := rapid.SampledFrom(sent).Draw(t, "ballot")
				to := rapid.SampledFrom(replicas).Draw(t, "to")
				if _, _, err := states[to].MergeBallots("p", []crdt.Ballot{b}); err != nil {
					t.Fatal(err)
				}
			case 3: // counters travel (NATS delta or push/pull)
				from, to := rapid.SampledFrom(replicas).Draw(t, "from"), rapid.SampledFrom(replicas).Draw(t, "to")
				tally, _ := states[from].Tally("p")
				if _, err := states[to].Merge("p", tally); err != nil {
					t.Fatal(err)
				}
			case 4: // a checkpoint
				rep := rapid.SampledFrom(replicas).Draw(t, "checkpointed")
				bs, counts, _ := states[rep].SnapshotBallots("p")
				ckpts[rep] = &checkpoint{ballots: bs, counts: counts, taken: len(chains[rep])}
			case 5: // a restart: from the checkpoint and the ledger tail, or the whole ledger
				rep := rapid.SampledFrom(replicas).Draw(t, "restarted")
				s := fresh(rep)
				from := 0
				if c := ckpts[rep]; c != nil && rapid.Bool().Draw(t, "from checkpoint?") {
					for o, pn := range c.counts {
						s.Count("p", o, int64(pn[0]))
						s.Count("p", o, -int64(pn[1]))
					}
					s.AddRecords("p", uint64(c.taken))
					if err := s.RestoreBallots("p", c.ballots); err != nil {
						t.Fatal(err)
					}
					from = c.taken
				}
				for j := from; j < len(chains[rep]); j++ {
					s.AddRecords("p", 1)
					s.Vote("p", ballotOf(s, &chains[rep][j]))
				}
				states[rep] = s
			}
		}
		// Quiescence: every ballot everywhere, counters exchanged both ways.
		for _, s := range states {
			if _, _, err := s.MergeBallots("p", sent); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			for _, from := range replicas {
				tally, _ := states[from].Tally("p")
				for _, to := range replicas {
					states[to].Merge("p", tally)
				}
			}
		}
		var streams []iter.Seq2[ledger.Record, error]
		for _, rep := range replicas {
			recs := chains[rep]
			streams = append(streams, func(yield func(ledger.Record, error) bool) {
				for _, r := range recs {
					if !yield(r, nil) {
						return
					}
				}
			})
		}
		want, err := ledger.ReconcileWith(ledger.ReconcileConfig{Poll: "p"}, streams...)
		if err != nil {
			t.Fatal(err)
		}
		for _, rep := range replicas {
			got, _, _ := states[rep].Totals("p")
			exact := map[string]int64{}
			for _, o := range options {
				exact[o] = int64(want.Totals[o])
			}
			if !maps.Equal(got, exact) {
				t.Fatalf("%s shows %v, certification %v", rep, got, exact)
			}
		}
	})
}
