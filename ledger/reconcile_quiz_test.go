package ledger

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// With FirstWins each voter's earliest counted record counts, as a slow
// model computes it; the counted answers' scores are listed by voter; the
// result does not depend on the order of streams; and it is not the
// digest of the same records reconciled as a poll.
func TestReconcileFirstWinsMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := historyGen().Draw(t, "history")
		// Every record is an answer whose score the test can trace.
		ch := chainer{}
		byReplica := map[string][]Record{}
		var all []Record
		for _, rep := range slices.Sorted(maps.Keys(h.byReplica)) {
			for _, r := range h.byReplica[rep] {
				r.Answer = &Answer{ElapsedMs: r.Wall * 100, Score: 1000 - r.Wall*10, RTTMs: -1}
				r = ch.add(r)
				byReplica[rep] = append(byReplica[rep], r)
				all = append(all, r)
			}
		}
		totals, dups, _, _, winners := modelWinners(all, 0, true)
		var streams, reversed []iter.Seq2[Record, error]
		for _, rep := range slices.Sorted(maps.Keys(byReplica)) {
			streams = append(streams, RecordsOf(byReplica[rep]))
			reversed = append([]iter.Seq2[Record, error]{RecordsOf(byReplica[rep])}, reversed...)
		}
		res, err := ReconcileWith(ReconcileConfig{Poll: "p", FirstWins: true}, streams...)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(res.Totals) != fmt.Sprint(totals) || res.Duplicates != uint64(dups) {
			t.Fatalf("totals %v dups %d, model %v %d", res.Totals, res.Duplicates, totals, dups)
		}
		if len(res.Answers) != len(winners) {
			t.Fatalf("%d answers, model %d", len(res.Answers), len(winners))
		}
		for i, a := range res.Answers {
			w := winners[a.Voter]
			if i > 0 && res.Answers[i-1].Voter >= a.Voter || a.Option != w.Option || a.Score != w.Answer.Score || a.ElapsedMs != w.Answer.ElapsedMs {
				t.Fatalf("answer %+v, model's %+v", a, w)
			}
		}
		again, _ := ReconcileWith(ReconcileConfig{Poll: "p", FirstWins: true}, reversed...)
		if again.Digest != res.Digest {
			t.Fatal("the stream order changed the digest")
		}
		last, _ := ReconcileWith(ReconcileConfig{Poll: "p"}, streams...)
		if last.Digest == res.Digest {
			t.Fatal("first-wins and last-wins results share a digest")
		}
	})
}

// A participant's second answer does not replace the first.
func TestFirstAnswerStands(t *testing.T) {
	ch := chainer{}
	first := vote("q", "p1", "a", "k1", 10)
	first.Replica, first.Answer = "eu-1", &Answer{ElapsedMs: 1000, Score: 975}
	second := vote("q", "p1", "b", "k2", 20)
	second.Replica, second.Answer = "us-1", &Answer{ElapsedMs: 800, Score: 0}
	first, second = ch.add(first), ch.add(second)
	res, err := ReconcileWith(ReconcileConfig{Poll: "q", FirstWins: true}, RecordsOf([]Record{second}), RecordsOf([]Record{first}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Totals["a"] != 1 || res.Totals["b"] != 0 || res.Superseded != 1 || len(res.Answers) != 1 || res.Answers[0].Score != 975 {
		t.Fatalf("%+v", res)
	}
}
