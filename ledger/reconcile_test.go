package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// history is a random multi-replica vote history, already chained.
type history struct {
	byReplica map[string][]Record
	all       []Record
}

// chainer assigns seq and prev per replica, as a ledger would.
type chainer map[string]*Record

func (c chainer) add(r Record) Record {
	if last := c[r.Replica]; last != nil {
		r.Seq, r.Prev = last.Seq+1, last.Hash()
	} else {
		r.Seq, r.Prev = 1, Hash{}
	}
	c[r.Replica] = &r
	return r
}

func historyGen() *rapid.Generator[history] {
	return rapid.Custom(func(t *rapid.T) history {
		replicas := []string{"ap-1", "eu-1", "us-1", "sa-1"}[:rapid.IntRange(1, 4).Draw(t, "replicas")]
		voters := rapid.IntRange(1, 8).Draw(t, "voters")
		h := history{byReplica: map[string][]Record{}}
		ch := chainer{}
		seen := map[string]map[string]bool{} // replica → idems it already holds
		var sent []Record                    // votes a client could retry
		for i := range rapid.IntRange(0, 60).Draw(t, "events") {
			rep := rapid.SampledFrom(replicas).Draw(t, "replica")
			var r Record
			if len(sent) > 0 && rapid.IntRange(0, 4).Draw(t, "retry?") == 0 {
				// A retry: the same vote, possibly reaching another region.
				r = rapid.SampledFrom(sent).Draw(t, "retried")
			} else {
				r = vote("p", fmt.Sprintf("voter-%d", rapid.IntRange(0, voters-1).Draw(t, "voter")),
					rapid.SampledFrom([]string{"red", "green", "blue"}).Draw(t, "option"), fmt.Sprintf("idem-%d", i), 0)
				r.Counted = rapid.IntRange(0, 5).Draw(t, "shadow?") != 0
				r.Late = rapid.IntRange(0, 7).Draw(t, "late?") == 0
				if !r.Counted {
					r.Trust = 0.1
				}
				sent = append(sent, r)
			}
			// Small wall-time range: ties are common and must be broken by
			// replica then seq.
			r.Wall = rapid.Int64Range(1, 10).Draw(t, "wall")
			r.Logical = rapid.Uint32Range(0, 1).Draw(t, "logical")
			r.Replica = rep
			if seen[rep] == nil {
				seen[rep] = map[string]bool{}
			}
			if seen[rep][r.Idem] {
				continue // that replica's ledger answers "duplicate" itself
			}
			seen[rep][r.Idem] = true
			r = ch.add(r)
			h.byReplica[rep] = append(h.byReplica[rep], r)
			h.all = append(h.all, r)
		}
		return h
	})
}

// modelWinners computes totals the slow, obvious way, written apart from
// Reconcile (O(n²) comparisons of (wall, logical, replica, seq) tuples),
// and each voter's counted record: the latest, or the earliest when
// firstWins.
func modelWinners(recs []Record, closesAt int64, firstWins bool) (totals map[string]uint64, dups, late, shadowed int, winners map[string]Record) {
	earlier := func(a, b Record) bool { // a before b
		ka := fmt.Sprintf("%020d|%010d|%s|%020d", a.Wall, a.Logical, a.Replica, a.Seq)
		kb := fmt.Sprintf("%020d|%010d|%s|%020d", b.Wall, b.Logical, b.Replica, b.Seq)
		return ka < kb
	}
	var kept []Record
	for _, r := range recs {
		dup := false
		for _, o := range recs {
			if o.Idem == r.Idem && earlier(o, r) {
				dup = true
			}
		}
		if dup {
			dups++
			continue
		}
		switch {
		case r.Late, closesAt > 0 && r.Wall >= closesAt:
			late++
		case !r.Counted:
			shadowed++
		default:
			kept = append(kept, r)
		}
	}
	totals, winners = map[string]uint64{}, map[string]Record{}
	for _, r := range kept {
		winner := true
		for _, o := range kept {
			if o.Voter == r.Voter && (!firstWins && earlier(r, o) || firstWins && earlier(o, r)) {
				winner = false
			}
		}
		if winner {
			totals[r.Option]++
			winners[r.Voter] = r
		}
	}
	return totals, dups, late, shadowed, winners
}

func TestReconcileMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := historyGen().Draw(t, "history")
		var streams []iter.Seq2[Record, error]
		for _, rep := range slices.Sorted(func(yield func(string) bool) {
			for r := range h.byReplica {
				if !yield(r) {
					return
				}
			}
		}) {
			streams = append(streams, RecordsOf(h.byReplica[rep]))
		}
		// A close time inside the history's wall range, or none.
		closesAt := rapid.Int64Range(0, 11).Draw(t, "closes_at")
		rule := rapid.SampledFrom([]string{"", CloseByNode}).Draw(t, "close rule")
		cfg := ReconcileConfig{ClosesAt: closesAt, CloseRule: rule}
		res, err := ReconcileWith(cfg, streams...)
		if err != nil {
			t.Fatal(err)
		}
		if res.ClosesAt != closesAt || res.CloseRule != rule {
			t.Fatalf("result's close %d %q, want %d %q", res.ClosesAt, res.CloseRule, closesAt, rule)
		}
		stampClose := closesAt // the stamp rule judges by the close; the node rule by each record's flag
		if rule == CloseByNode {
			stampClose = 0
		}
		totals, dups, late, shadowed, winners := modelWinners(h.all, stampClose, false)
		var after uint64
		for _, w := range winners {
			if rule == CloseByNode && closesAt > 0 && w.Wall >= closesAt {
				after++
			}
		}
		if res.AfterClose != after {
			t.Fatalf("after_close %d, model %d", res.AfterClose, after)
		}
		var total uint64
		for o, n := range totals {
			total += n
			if res.Totals[o] != n {
				t.Fatalf("option %s: reconcile %d, model %d", o, res.Totals[o], n)
			}
		}
		if len(res.Totals) != len(totals) || res.Total != total {
			t.Fatalf("totals %v, model %v", res.Totals, totals)
		}
		if res.Duplicates != uint64(dups) || res.Late != uint64(late) || res.Shadowed != uint64(shadowed) {
			t.Fatalf("dups/late/shadowed = %d/%d/%d, model %d/%d/%d", res.Duplicates, res.Late, res.Shadowed, dups, late, shadowed)
		}
		if res.Records != uint64(len(h.all)) {
			t.Fatalf("records %d, want %d", res.Records, len(h.all))
		}

		// Any split of the records into streams, in any order, with some
		// records given twice, gives the same result and digest.
		shuffled := rapid.Permutation(h.all).Draw(t, "shuffled")
		k := rapid.IntRange(1, 5).Draw(t, "streams")
		parts := make([][]Record, k)
		for i, r := range shuffled {
			parts[i%k] = append(parts[i%k], r)
		}
		if len(h.all) > 0 {
			parts[0] = append(parts[0], rapid.SampledFrom(h.all).Draw(t, "copy"))
		}
		var again []iter.Seq2[Record, error]
		for _, p := range parts {
			again = append(again, RecordsOf(p))
		}
		res2, err := ReconcileWith(cfg, again...)
		if err != nil {
			t.Fatal(err)
		}
		if res2.Digest != res.Digest {
			t.Fatalf("digest depends on stream order: %s vs %s", res.Digest, res2.Digest)
		}

		// The same records already in memory (a certifier's copies) give
		// the same result, and are left as they were.
		var chains [][]*Record
		for _, p := range parts {
			var ptrs []*Record
			for i := range p {
				ptrs = append(ptrs, &p[i])
			}
			chains = append(chains, ptrs)
		}
		before := slices.Clone(chains[0])
		res3, err := ReconcileChains(cfg, chains...)
		if err != nil {
			t.Fatal(err)
		}
		if res3.Digest != res.Digest {
			t.Fatalf("ReconcileChains digest %s, ReconcileWith %s", res3.Digest, res.Digest)
		}
		if !slices.Equal(before, chains[0]) {
			t.Fatal("ReconcileChains reordered its input")
		}
	})
}

func TestReconcileRejectsBadStreams(t *testing.T) {
	ch := chainer{}
	a := ch.add(withReplica(vote("p", "v", "red", "k1", 1), "eu-1"))
	b := ch.add(withReplica(vote("p", "v", "red", "k2", 2), "eu-1"))
	forked := b
	forked.Option = "blue"
	other := chainer{}.add(withReplica(vote("q", "v", "red", "k1", 1), "eu-1"))
	cases := []struct {
		name string
		recs []Record
		want error
	}{
		{"gap", []Record{b}, ErrChain},
		{"fork", []Record{a, b, forked}, ErrConflict},
		{"two polls", []Record{a, other}, ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Reconcile(RecordsOf(c.recs)); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			var ptrs []*Record
			for i := range c.recs {
				ptrs = append(ptrs, &c.recs[i])
			}
			if _, err := ReconcileChains(ReconcileConfig{}, ptrs); !errors.Is(err, c.want) {
				t.Fatalf("ReconcileChains: err = %v, want %v", err, c.want)
			}
		})
	}
	res, err := Reconcile(RecordsOf([]Record{b, a}))
	if err != nil || res.Total != 1 || res.Superseded != 1 || res.Totals["red"] != 1 {
		t.Fatalf("out-of-order chain: %+v, %v", res, err)
	}
}

func withReplica(r Record, rep string) Record { r.Replica = rep; return r }

// A poll nobody voted in still has a result of its own: named, with total
// 0, and a digest that differs from another empty poll's.
func TestReconcileEmptyPollIsNamed(t *testing.T) {
	empty := func(yield func(Record, error) bool) {}
	a, err := ReconcileWith(ReconcileConfig{Poll: "a"}, empty)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReconcileWith(ReconcileConfig{Poll: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Poll != "a" || a.Total != 0 || a.Records != 0 || a.Digest == b.Digest {
		t.Fatalf("empty results: %+v / %+v", a, b)
	}
	if _, err := ReconcileWith(ReconcileConfig{Poll: "other"}, ReadNDJSON(bytes.NewReader(exportOf(t, "eu-1", "p", 2)))); !errors.Is(err, ErrInvalid) {
		t.Fatalf("records of another poll than the one named: %v", err)
	}
}

// The two close rules part on one record: counted by its node, stamped
// after the close it had not heard of. The stamp rule makes it late; the
// node rule counts it and says so in after_close, which the digest covers.
func TestCloseRuleCountsWhatTheNodeDecided(t *testing.T) {
	ch := chainer{}
	recs := []Record{
		ch.add(Record{Poll: "p", Replica: "a", Wall: 5, Voter: "v1", Option: "yes", Idem: "k1", Counted: true}),
		ch.add(Record{Poll: "p", Replica: "a", Wall: 12, Voter: "v2", Option: "no", Idem: "k2", Counted: true}),
		ch.add(Record{Poll: "p", Replica: "a", Wall: 13, Voter: "v3", Option: "no", Idem: "k3", Late: true}),
	}
	byStamp, err := ReconcileWith(ReconcileConfig{Poll: "p", ClosesAt: 10}, RecordsOf(recs))
	if err != nil {
		t.Fatal(err)
	}
	byNode, err := ReconcileWith(ReconcileConfig{Poll: "p", ClosesAt: 10, CloseRule: CloseByNode}, RecordsOf(recs))
	if err != nil {
		t.Fatal(err)
	}
	if byStamp.Total != 1 || byStamp.Late != 2 || byStamp.AfterClose != 0 {
		t.Fatalf("stamp rule: total %d late %d after_close %d, want 1 2 0", byStamp.Total, byStamp.Late, byStamp.AfterClose)
	}
	if byNode.Total != 2 || byNode.Late != 1 || byNode.AfterClose != 1 || byNode.Totals["no"] != 1 {
		t.Fatalf("node rule: total %d late %d after_close %d totals %v, want 2 1 1", byNode.Total, byNode.Late, byNode.AfterClose, byNode.Totals)
	}
	if byNode.Digest == byStamp.Digest {
		t.Fatal("the two rules share a digest")
	}
	if _, err := ReconcileWith(ReconcileConfig{Poll: "p", CloseRule: "stamp"}, RecordsOf(recs)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an unknown rule: %v, want ErrInvalid", err)
	}
}
