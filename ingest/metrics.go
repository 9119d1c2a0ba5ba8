package ingest

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"tally/api"
)

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
			Help: "Voter-token requests by outcome: issued, issued_unvouched (past the address group's vouched tokens: its votes are shadowed), puzzle_solved, puzzle_refused, rate_limited; reissued counts the tokens issued for the voter of a previous token the client presented (besides issued or issued_unvouched).",
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

// refused counts in tally_votes_total a vote request refused before the
// pipeline's observe sees it (its body unread or undecodable, its voter
// token refused), by the refusal's code: votes is how many votes it
// carried (VotesIn). Every refusal is counted once, where it is made.
func (m *metrics) refused(err error, votes int) {
	m.votes.WithLabelValues(StatusRejected, RefusalCode(err)).Add(float64(max(votes, 1)))
}

// CountRefused counts in tally_votes_total, as the pipeline counts its
// own refusals, a vote request the node refused before handing it to the
// pipeline (not ready yet, a body too large for it): votes is how many
// votes it carried, VotesIn of its body when it was read, else 1.
func (p *Pipeline) CountRefused(err error, votes int) { p.m.refused(err, votes) }

// RefusalCode is the reason a refusal is counted under: its API error
// code, internal for an error that is not an *api.Error.
func RefusalCode(err error) string {
	var e *api.Error
	if errors.As(err, &e) && e.Code != "" {
		return e.Code
	}
	return api.CodeInternal
}

// VotesIn is how many votes a vote request body carries, for counting
// its refusal: the length of a "votes" batch of 1 to MaxBatch, else 1 (a
// single vote, or a body that cannot be read as votes).
func VotesIn(body []byte) int {
	if !bytes.Contains(body, []byte(`"votes"`)) {
		return 1
	}
	var b struct {
		Votes []json.RawMessage `json:"votes"`
	}
	if json.Unmarshal(body, &b) != nil || len(b.Votes) == 0 || len(b.Votes) > MaxBatch {
		return 1
	}
	return len(b.Votes)
}
