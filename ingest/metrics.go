package ingest

import "github.com/prometheus/client_golang/prometheus"

// metrics are the pipeline's Prometheus series, registered on the
// registerer the node injects.
type metrics struct {
	votes    *prometheus.CounterVec
	latency  prometheus.Histogram
	sessions *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		votes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_votes_total",
			Help: "Votes by result (accepted, duplicate, late, rejected) and, for rejections, reason (the API error code).",
		}, []string{"result", "reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tally_ingest_seconds",
			Help:    "Time from receiving a vote request to its acknowledgement, ledger fsync included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_sessions_total",
			Help: "Voter-token requests by outcome: issued, puzzle_solved, puzzle_refused, rate_limited.",
		}, []string{"outcome"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.votes, m.latency, m.sessions} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
