package certify

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tally/state"
)

// liveCertifiedDiff is, for one certified poll, how far the live tally is
// from the certificate: the sum over options of |live - certified|. Zero
// once every ballot has reached this node; above zero for longer than the
// gossip delay, a replica's ballots are not arriving (see
// docs/certification.md).
func liveCertifiedDiff(live map[string]int64, cert state.Certificate) int64 {
	var d int64
	seen := map[string]bool{}
	for o, v := range live {
		seen[o] = true
		d += abs(v - int64(cert.Totals[o]))
	}
	for o, v := range cert.Totals {
		if !seen[o] {
			d += int64(v)
		}
	}
	return d
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// ExactnessCollector reports, at scrape time, each poll's status, the
// voter state held for it in memory and, for certified polls, the live
// tally's distance from the certificate. With public set (the metrics are
// on the public port) a hidden poll's voter-state sizes, which would be
// its counts, are left out until the reveal.
type ExactnessCollector struct {
	state                 *state.State
	now                   func() time.Time
	public                bool
	diff, ballots, voters *prometheus.Desc
	bytes                 *prometheus.Desc
	status, overdue       *prometheus.Desc
}

// NewExactnessCollector returns the collector of st's polls.
func NewExactnessCollector(st *state.State, now func() time.Time, public bool) *ExactnessCollector {
	return &ExactnessCollector{state: st, now: now, public: public,
		diff: prometheus.NewDesc("tally_live_certified_diff",
			"For a certified poll still in memory: sum over options of |live count - certified count| at this node (0 when the live tally is exact).", []string{"poll"}, nil),
		ballots: prometheus.NewDesc("tally_voter_state_ballots",
			"Ballots (every replica's votes' effects on voter state) held for the poll.", []string{"poll"}, nil),
		voters: prometheus.NewDesc("tally_voter_state_voters",
			"Distinct voters in the poll's voter state.", []string{"poll"}, nil),
		bytes: prometheus.NewDesc("tally_voter_state_bytes",
			"Estimated memory of the poll's voter state.", []string{"poll"}, nil),
		status: prometheus.NewDesc("tally_poll_status",
			"1 for each poll held, labelled with its status: scheduled, open, closed (not yet certified) or reconciled (certified).", []string{"poll", "status"}, nil),
		overdue: prometheus.NewDesc("tally_poll_certification_overdue_seconds",
			"For a poll closed past its grace and not yet certified: seconds since the grace ended. Certification normally takes seconds; a value that keeps growing means a replica's records cannot be collected (docs/operations.md, \"A lost node\").", []string{"poll"}, nil),
	}
}

// Describe sends the collector's descriptions.
func (c *ExactnessCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.diff
	ch <- c.ballots
	ch <- c.voters
	ch <- c.bytes
	ch <- c.status
	ch <- c.overdue
}

// Collect sends one reading of every poll.
func (c *ExactnessCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.state
	now := c.now().UnixMilli()
	for _, d := range st.Defs.Polls() {
		cert, certified := st.Defs.Certificate(d.ID)
		reconciled := certified && cert.Status == state.Reconciled
		ch <- prometheus.MustNewConstMetric(c.status, prometheus.GaugeValue, 1, d.ID, string(d.StatusAt(now, reconciled)))
		if !reconciled && d.ClosesAt != 0 && now > d.GraceEnd() {
			ch <- prometheus.MustNewConstMetric(c.overdue, prometheus.GaugeValue, float64(now-d.GraceEnd())/1000, d.ID)
		}
		if d.Hidden && c.public {
			continue
		}
		if s, err := st.Ballots(d.ID); err == nil {
			ch <- prometheus.MustNewConstMetric(c.ballots, prometheus.GaugeValue, float64(s.Ballots), d.ID)
			ch <- prometheus.MustNewConstMetric(c.voters, prometheus.GaugeValue, float64(s.Voters), d.ID)
			ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(s.Bytes), d.ID)
		}
		if !reconciled {
			continue
		}
		live, _, err := st.Totals(d.ID)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.diff, prometheus.GaugeValue, float64(liveCertifiedDiff(live, cert)), d.ID)
	}
}
