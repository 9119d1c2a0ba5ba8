package node

import (
	"math"
	"runtime/metrics"
	"sync"
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used so far (user and
// system), for the fan-out's pacer; 0 where the kernel cannot say.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// schedWait returns, for the fan-out's pacer, a function that says how
// long this process's runnable goroutines waited for a core since its
// previous call, p99, from the Go scheduler's latency histogram
// (runtime/metrics "/sched/latencies:seconds"). It rises when the
// machine's cores are taken, by this process or by others: what the vote
// path's requests then queue for. 0 when nothing was scheduled.
func schedWait() func() time.Duration {
	const name = "/sched/latencies:seconds"
	var (
		mu   sync.Mutex
		prev []uint64
	)
	sample := []metrics.Sample{{Name: name}}
	return func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindFloat64Histogram {
			return 0
		}
		h := sample[0].Value.Float64Histogram()
		counts := make([]uint64, len(h.Counts))
		var total uint64
		for i, c := range h.Counts {
			if i < len(prev) {
				counts[i] = c - prev[i]
			} else {
				counts[i] = c
			}
			total += counts[i]
		}
		prev = append(prev[:0], h.Counts...)
		return p99(h.Buckets, counts, total)
	}
}

// p99 is the 99th percentile of a histogram's counts (buckets holds the
// boundaries: bucket i spans buckets[i] to buckets[i+1]), as the bucket's
// upper bound.
func p99(buckets []float64, counts []uint64, total uint64) time.Duration {
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(float64(total) * 0.99))
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= want {
			hi := buckets[i+1]
			if math.IsInf(hi, 1) {
				hi = buckets[i]
			}
			return time.Duration(hi * float64(time.Second))
		}
	}
	return 0
}
