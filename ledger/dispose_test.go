package ledger

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// DisposeChains says of each record what ReconcileChains counted it as
// (and what both ReconcileChains and Merge mark it as: Disposition),
// under any close, trust floor and counting rule: as many counted,
// superseded, late, shadowed and duplicate records as the result says,
// the counted ones making its totals; a superseded record points at its
// voter's counted one, a duplicate at the standing, earlier record of its
// key; and the records come in the tree's order (by replica, then seq).
func TestDisposeMatchesReconcile(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := historyGen().Draw(t, "history")
		var chains [][]*Record
		for _, rep := range slices.Sorted(maps.Keys(h.byReplica)) {
			var recs []*Record
			for i := range h.byReplica[rep] {
				recs = append(recs, &h.byReplica[rep][i])
			}
			chains = append(chains, recs)
		}
		cfg := ReconcileConfig{Poll: "p", ClosesAt: rapid.Int64Range(0, 11).Draw(t, "closes_at"),
			TrustFloor: float64(rapid.IntRange(0, 10).Draw(t, "floor")) / 10, FirstWins: rapid.Bool().Draw(t, "first wins"),
			CloseRule: rapid.SampledFrom([]string{"", CloseByNode}).Draw(t, "close rule")}
		if len(chains) == 0 {
			return
		}
		res, err := ReconcileChains(cfg, chains...)
		if err != nil {
			t.Fatal(err)
		}
		slices.Reverse(chains) // any order in: the tree's order out
		d, err := DisposeChains(cfg, chains...)
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(d.Records)) != res.Records {
			t.Fatalf("%d records disposed, %d reconciled", len(d.Records), res.Records)
		}
		sorted := slices.IsSortedFunc(d.Records, func(a, b *Record) int {
			if c := strings.Compare(a.Replica, b.Replica); c != 0 {
				return c
			}
			return int(a.Seq) - int(b.Seq)
		})
		if !sorted {
			t.Fatal("the records are not in the tree's order")
		}
		m := NewMerge("p")
		for _, recs := range chains {
			for _, r := range recs {
				if err := m.Add(r); err != nil {
					t.Fatal(err)
				}
			}
		}
		merged, err := m.Result(cfg)
		if err != nil {
			t.Fatal(err)
		}
		n := map[Disposition]uint64{}
		totals := map[string]uint64{}
		for i, r := range d.Records {
			if got := res.Disposition(r.Replica, r.Seq); got != d.Of[i] {
				t.Fatalf("record %s/%d: the reconcile made it %d, DisposeChains %d", r.Replica, r.Seq, got, d.Of[i])
			}
			if got := merged.Disposition(r.Replica, r.Seq); got != d.Of[i] {
				t.Fatalf("record %s/%d: the merge made it %d, DisposeChains %d", r.Replica, r.Seq, got, d.Of[i])
			}
			n[d.Of[i]]++
			o := d.Other[i]
			switch d.Of[i] {
			case DispCounted:
				totals[r.Option]++
			case DispSuperseded:
				if o < 0 || d.Of[o] != DispCounted || d.Records[o].Voter != r.Voter {
					t.Fatalf("superseded record %d points at %d", i, o)
				}
			case DispDuplicate:
				if o < 0 || d.Records[o].Idem != r.Idem || d.Records[o].After(r) || d.Of[o] == DispDuplicate {
					t.Fatalf("duplicate record %d points at %d", i, o)
				}
			}
			if (d.Of[i] == DispSuperseded || d.Of[i] == DispDuplicate) != (o >= 0) {
				t.Fatalf("record %d (%d) points at %d", i, d.Of[i], o)
			}
		}
		if n[DispCounted] != res.Total || n[DispSuperseded] != res.Superseded || n[DispLate] != res.Late ||
			n[DispShadowed] != res.Shadowed || n[DispDuplicate] != res.Duplicates {
			t.Fatalf("disposed %v, reconciled total %d superseded %d late %d shadowed %d duplicates %d",
				n, res.Total, res.Superseded, res.Late, res.Shadowed, res.Duplicates)
		}
		if !maps.Equal(totals, res.Totals) {
			t.Fatalf("counted %v, totals %v", totals, res.Totals)
		}
	})
}
