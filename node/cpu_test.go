package node

import (
	"math"
	"testing"
	"time"
)

// p99 reads the bucket holding the 99th percentile, as its upper bound
// (the lower one for the last, open bucket); nothing counted is 0.
func TestSchedWaitP99(t *testing.T) {
	buckets := []float64{0, 0.001, 0.01, 0.1, math.Inf(1)}
	for _, tc := range []struct {
		counts []uint64
		want   time.Duration
	}{
		{[]uint64{0, 0, 0, 0}, 0},
		{[]uint64{100, 0, 0, 0}, time.Millisecond},
		{[]uint64{98, 2, 0, 0}, 10 * time.Millisecond},
		{[]uint64{99, 1, 0, 0}, time.Millisecond},
		{[]uint64{50, 0, 0, 50}, 100 * time.Millisecond},
	} {
		var total uint64
		for _, c := range tc.counts {
			total += c
		}
		if got := p99(buckets, tc.counts, total); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.counts, got, tc.want)
		}
	}
}
