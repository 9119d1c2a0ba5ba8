package ingest

import (
	"math/rand/v2"
	"testing"

	"tally/trust"
)

// TestDistinctVotersKeepCounting: exact to 4,096, then an estimate within
// 10% at 10,000, 50,000 and 200,000 voters, never falling back to the cap
// (issue 25: the signal was capped at 4,096, so it cost at most 0.27).
func TestDistinctVotersKeepCounting(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	d := newDistinct()
	seen := 0
	for _, n := range []int{1, 4096, 10_000, 50_000, 200_000} {
		for ; seen < n; seen++ {
			h := rng.Uint64()
			d.add(h)
			d.add(h) // a voter seen twice is one
		}
		got := d.count()
		if n <= exactCap && got != n {
			t.Fatalf("%d voters counted %d", n, got)
		}
		if diff := float64(got-n) / float64(n); diff > 0.1 || diff < -0.1 {
			t.Fatalf("%d voters estimated %d (%.1f%% off)", n, got, 100*diff)
		}
	}
	if s := trust.Score(trust.Signals{IPVoters: 200_000, TokenAge: -1, SocketAge: -1}); s > 0.05 {
		t.Fatalf("200,000 voters behind one address score %.3f", s)
	}
}
