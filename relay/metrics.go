package relay

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the relay's counters, at edges and full nodes alike. A nil
// *Metrics counts nothing.
type Metrics struct {
	batches   prometheus.Counter
	requests  prometheus.Counter
	batchSize prometheus.Histogram
	resends   prometheus.Counter
	answered  prometheus.Counter
	refusals  *prometheus.CounterVec
	bytes     *prometheus.CounterVec // sealed relay messages' bytes at the edge, by direction
	// unanswered counts the requests of batches no full node answered in
	// time, by the edge's own answer: unavailable (no full node can have
	// taken them) or unknown (one may have: 504 outcome_unknown).
	unansweredReqs *prometheus.CounterVec
	// windowSecs is the batch window this edge set last from its full
	// nodes' reply times.
	windowSecs prometheus.Gauge
}

// NewMetrics registers the relay's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		batches:  prometheus.NewCounter(prometheus.CounterOpts{Name: "tally_relay_batches_total", Help: "Relay messages this edge sent (each a batch of its clients' requests)."}),
		requests: prometheus.NewCounter(prometheus.CounterOpts{Name: "tally_relay_requests_total", Help: "Client requests this edge relayed."}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tally_relay_batch_requests", Help: "Requests per relay message this edge sent.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}}),
		resends:        prometheus.NewCounter(prometheus.CounterOpts{Name: "tally_relay_resends_total", Help: "Relay messages this edge sent again (no answer in time, no full node, a lost connection)."}),
		answered:       prometheus.NewCounter(prometheus.CounterOpts{Name: "tally_relay_served_requests_total", Help: "Relayed requests this full node answered."}),
		refusals:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tally_relay_refused_total", Help: "Relay messages this full node dropped unanswered, by reason (unauthenticated, malformed, expired: past the time its edge gave it, by this node's clock)."}, []string{"reason"}),
		unansweredReqs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tally_relay_unanswered_requests_total", Help: "Requests this edge answered itself because no full node answered their batch in time, by outcome: unavailable (503: no full node can have taken them, nothing changed) or unknown (504 outcome_unknown: a full node may have taken them; clients retry with the same key)."}, []string{"outcome"}),
		windowSecs:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "tally_relay_window_seconds", Help: "How long this edge's last batch gathered requests while another was in flight: about its full nodes' smoothed reply time, between 2 and 20 ms."}),
		bytes:          prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tally_relay_bytes_total", Help: "Bytes of the sealed relay messages this edge sent (out, resends included) and of the answers it received (in): what the relay puts on NATS."}, []string{"direction"}),
	}
	for _, c := range []prometheus.Collector{m.batches, m.requests, m.batchSize, m.resends, m.answered, m.refusals, m.bytes, m.unansweredReqs, m.windowSecs} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) batch(n int) {
	if m != nil {
		m.batches.Inc()
		m.requests.Add(float64(n))
		m.batchSize.Observe(float64(n))
	}
}

func (m *Metrics) moved(direction string, n int) {
	if m != nil {
		m.bytes.WithLabelValues(direction).Add(float64(n))
	}
}

func (m *Metrics) unanswered(outcome string, n int) {
	if m != nil {
		m.unansweredReqs.WithLabelValues(outcome).Add(float64(n))
	}
}

func (m *Metrics) resend() {
	if m != nil {
		m.resends.Inc()
	}
}

func (m *Metrics) served(n int) {
	if m != nil {
		m.answered.Add(float64(n))
	}
}

func (m *Metrics) refused(reason string) {
	if m != nil {
		m.refusals.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) window(d time.Duration) {
	if m != nil {
		m.windowSecs.Set(d.Seconds())
	}
}
