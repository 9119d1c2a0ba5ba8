package certify

import (
	"testing"

	"tally/state"
)

// The live-vs-certified difference at the edges: a poll nobody voted in,
// one vote, an option only one side has, and counts near the maximum.
func TestLiveCertifiedDiff(t *testing.T) {
	cert := func(totals map[string]uint64) state.Certificate { return state.Certificate{Totals: totals} }
	for name, c := range map[string]struct {
		live map[string]int64
		cert state.Certificate
		want int64
	}{
		"nobody voted":            {map[string]int64{}, cert(nil), 0},
		"zero counts on one side": {map[string]int64{"a": 0, "b": 0}, cert(map[string]uint64{}), 0},
		"one vote, same":          {map[string]int64{"a": 1}, cert(map[string]uint64{"a": 1}), 0},
		"one vote, elsewhere":     {map[string]int64{"a": 1}, cert(map[string]uint64{"b": 1}), 2},
		"live above":              {map[string]int64{"a": 3, "b": 1}, cert(map[string]uint64{"a": 2, "b": 1}), 1},
		"a retracted count":       {map[string]int64{"a": -1}, cert(map[string]uint64{}), 1},
		"large":                   {map[string]int64{"a": 1 << 40}, cert(map[string]uint64{"a": 1<<40 - 5}), 5},
	} {
		if got := liveCertifiedDiff(c.live, c.cert); got != c.want {
			t.Errorf("%s: %d, want %d", name, got, c.want)
		}
	}
}
