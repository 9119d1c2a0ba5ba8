package fanout

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	viewers  *prometheus.GaugeVec
	sent     *prometheus.CounterVec
	replaced prometheus.Counter
	slow     prometheus.Counter
	tick     prometheus.Histogram
	encoded  prometheus.Counter
	interval prometheus.Gauge
	wait     prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		viewers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tally_viewers", Help: "Connected viewers by transport.",
		}, []string{"transport"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_frames_sent_total", Help: "Frames written to viewers, by transport.",
		}, []string{"transport"}),
		replaced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_frames_replaced_total", Help: "Pending frames replaced by a newer one before they were written.",
		}),
		slow: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_viewers_dropped_slow_total", Help: "Viewers disconnected because a write did not finish in time.",
		}),
		tick: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tally_fanout_tick_seconds", Help: "Time one hub tick takes to read, diff and encode.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 2, 16),
		}),
		encoded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_fanout_encoded_bytes_total", Help: "Bytes of frames encoded (once per tick, not per viewer).",
		}),
		interval: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tally_fanout_interval_seconds", Help: "The hubs' tick now: --tick, stretched up to --max-tick while the node's CPU use is over --fanout-cpu or its goroutines wait over 10 ms for a core.",
		}),
		wait: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tally_fanout_sched_wait_seconds", Help: "How long the node's runnable goroutines waited for a core over the last second, p99 (the Go scheduler's latencies): over 10 ms the fan-out's tick stretches, the machine's cores being taken.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.viewers, m.sent, m.replaced, m.slow, m.tick, m.encoded, m.interval, m.wait} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
