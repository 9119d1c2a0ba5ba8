package ledger

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// A Merge fed the replicas' chains in any interleaving gives what
// ReconcileChains gives over the same records, digest and JSON included,
// under any close, trust floor and either counting rule; and it can be
// asked again as more records arrive.
func TestMergeMatchesReconcile(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := historyGen().Draw(t, "history")
		replicas := slices.Sorted(maps.Keys(h.byReplica))
		// Trust scores and quiz answers too, chained again.
		recs := map[string][]*Record{}
		ch := chainer{}
		for _, rep := range replicas {
			for _, r := range h.byReplica[rep] {
				r.Trust = float64(rapid.IntRange(0, 10).Draw(t, "trust")) / 10
				if rapid.Bool().Draw(t, "answer?") {
					r.Answer = &Answer{ElapsedMs: r.Wall * 100, Score: 1000 - r.Wall*10, RTTMs: -1}
				}
				r = ch.add(r)
				recs[rep] = append(recs[rep], &r)
			}
		}
		cfg := ReconcileConfig{Poll: "p", ClosesAt: rapid.Int64Range(0, 11).Draw(t, "closes_at"),
			TrustFloor: float64(rapid.IntRange(0, 10).Draw(t, "floor")) / 10, FirstWins: rapid.Bool().Draw(t, "first wins"),
			CloseRule: rapid.SampledFrom([]string{"", CloseByNode}).Draw(t, "close rule")}

		m := NewMerge("p")
		next := map[string]int{} // replica → records added
		check := func() {
			var chains [][]*Record
			for _, rep := range replicas {
				chains = append(chains, recs[rep][:next[rep]])
			}
			want, err := ReconcileChains(cfg, chains...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Result(cfg)
			if err != nil {
				t.Fatal(err)
			}
			wj, _ := json.Marshal(want)
			gj, _ := json.Marshal(got)
			if string(wj) != string(gj) {
				t.Fatalf("merge:\n%s\nreconcile:\n%s", gj, wj)
			}
			for _, recs := range chains {
				for _, r := range recs {
					if g, w := got.Disposition(r.Replica, r.Seq), want.Disposition(r.Replica, r.Seq); g != w || g == 0 {
						t.Fatalf("record %s/%d: the merge made it %d, the reconcile %d", r.Replica, r.Seq, g, w)
					}
				}
			}
		}
		for {
			var open []string
			for _, rep := range replicas {
				if next[rep] < len(recs[rep]) {
					open = append(open, rep)
				}
			}
			if len(open) == 0 {
				break
			}
			rep := rapid.SampledFrom(open).Draw(t, "next replica")
			if err := m.Add(recs[rep][next[rep]]); err != nil {
				t.Fatal(err)
			}
			next[rep]++
			if rapid.IntRange(0, 9).Draw(t, "ask?") == 0 {
				check()
			}
		}
		check()
	})
}

// A record that does not continue its chain, or of another poll, breaks
// the merge for good: it never answers with records missing.
func TestMergeRefusesWhatDoesNotChain(t *testing.T) {
	ch := chainer{}
	a := ch.add(withReplica(vote("p", "v", "red", "k1", 1), "eu-1"))
	b := ch.add(withReplica(vote("p", "v", "red", "k2", 2), "eu-1"))
	c := ch.add(withReplica(vote("p", "w", "red", "k3", 3), "eu-1"))
	forked := b
	forked.Option = "blue"
	other := withReplica(vote("q", "v", "red", "k1", 1), "us-1")
	other.Seq = 1
	for _, tc := range []struct {
		name string
		recs []Record
		want error
	}{
		{"a seq skipped", []Record{a, c}, ErrChain},
		{"a seq repeated", []Record{a, b, b}, ErrChain},
		{"a different record linked", []Record{a, forked, c}, ErrChain},
		{"not from seq 1", []Record{b}, ErrChain},
		{"another poll", []Record{a, other}, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMerge("p")
			var err error
			for i := range tc.recs {
				if err = m.Add(&tc.recs[i]); err != nil {
					break
				}
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Add: %v, want %v", err, tc.want)
			}
			if _, err := m.Result(ReconcileConfig{}); !errors.Is(err, tc.want) {
				t.Fatalf("Result after a refused record: %v, want %v", err, tc.want)
			}
			fresh := a
			if err := m.Add(&fresh); !errors.Is(err, tc.want) {
				t.Fatalf("Add after a refused record: %v, want %v", err, tc.want)
			}
		})
	}
	m := NewMerge("p")
	if _, err := m.Result(ReconcileConfig{Poll: "q"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a merge of p asked for q: %v", err)
	}
	empty, err := m.Result(ReconcileConfig{Poll: "p"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ReconcileChains(ReconcileConfig{Poll: "p"})
	if empty.Digest != want.Digest || empty.Replicas == nil {
		t.Fatalf("an empty merge: %+v, want %+v", empty, want)
	}
}
