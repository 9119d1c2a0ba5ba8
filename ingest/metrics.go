package ingest

import "github.com/prometheus/client_golang/prometheus"

// metrics are the pipeline's Prometheus series, registered on the
// registerer the node injects.
type metrics struct {
	votes    *prometheus.CounterVec
	latency  prometheus.Histogram
	sessions *prometheus.CounterVec
	trust    prometheus.Histogram
	shadowed prometheus.Counter
	// remoteDuplicates: retries answered from another region's ballot.
	remoteDuplicates prometheus.Counter
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
		trust: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tally_vote_trust",
			Help:    "Trust scores of ledgered votes; those under the floor are shadowed (counted in tally_votes_total{reason=\"shadowed\"}).",
			Buckets: []float64{0.05, 0.1, 0.15, 0.25, 0.5, 0.75, 0.99, 1},
		}),
		shadowed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_votes_shadowed_total",
			Help: "Votes ledgered and acknowledged but not counted: trust score under the floor.",
		}),
		remoteDuplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_votes_remote_duplicates_total",
			Help: "Retries answered duplicate from the ballot another region took (also in tally_votes_total{result=\"duplicate\"}).",
		}),
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_sessions_total",
			Help: "Voter-token requests by outcome: issued, issued_unvouched (past the address group's vouched tokens: its votes are shadowed), puzzle_solved, puzzle_refused, rate_limited.",
		}, []string{"outcome"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.votes, m.latency, m.sessions, m.trust, m.shadowed, m.remoteDuplicates} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
