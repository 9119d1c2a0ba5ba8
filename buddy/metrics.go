package buddy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the buddy copies' Prometheus series; a nil *Metrics counts
// nothing.
type Metrics struct {
	batches, records, failures, oneCopy, caught, storedRecs, storedBatches, bytes prometheus.Counter
	refusals                                                                      *prometheus.CounterVec
	latency                                                                       prometheus.Histogram
}

// NewMetrics registers the series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	c := func(name, help string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(x)
		return x
	}
	m := &Metrics{
		batches:       c("tally_buddy_batches_total", "Ledger batches this node copied to its buddy."),
		records:       c("tally_buddy_records_total", "Records this node copied to its buddy with their batches."),
		failures:      c("tally_buddy_failures_total", "Ledger batches whose copy to a buddy failed (no buddy, no answer, refused)."),
		oneCopy:       c("tally_buddy_one_copy_votes_total", "Votes acknowledged with one copy under --ack-copies-degrade."),
		caught:        c("tally_buddy_caught_up_records_total", "Records sent to a buddy that lacked them (a new buddy, or one behind)."),
		storedRecs:    c("tally_buddy_stored_records_total", "Records this node stored as a buddy, fsynced."),
		storedBatches: c("tally_buddy_stored_batches_total", "Copy requests this node stored as a buddy, each one fsync."),
		bytes:         c("tally_buddy_bytes_total", "Bytes of the sealed copy requests this node sent to its buddies (answers not included)."),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tally_buddy_refused_total",
			Help: "Copy requests this node refused as a buddy, by reason (unsealed, malformed, store, conflict, signature: heads signed with a key other than the sender's)."}, []string{"reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tally_buddy_seconds",
			Help: "Time from a synced ledger batch to its copy's fsync on the buddy.", Buckets: prometheus.ExponentialBuckets(0.0002, 2, 14)}),
	}
	reg.MustRegister(m.refusals, m.latency)
	return m
}

func (m *Metrics) sent(n int, took time.Duration) {
	if m != nil {
		m.batches.Inc()
		m.records.Add(float64(n))
		m.latency.Observe(took.Seconds())
	}
}

func (m *Metrics) wrote(n int) {
	if m != nil {
		m.bytes.Add(float64(n))
	}
}

func (m *Metrics) failed() {
	if m != nil {
		m.failures.Inc()
	}
}

func (m *Metrics) acknowledgedOnce(n int) {
	if m != nil {
		m.oneCopy.Add(float64(n))
	}
}

func (m *Metrics) caughtUp(n int) {
	if m != nil {
		m.caught.Add(float64(n))
	}
}

func (m *Metrics) stored(n int) {
	if m != nil {
		m.storedBatches.Inc()
		m.storedRecs.Add(float64(n))
	}
}

func (m *Metrics) refused(reason string) {
	if m != nil {
		m.refusals.WithLabelValues(reason).Inc()
	}
}
