package relay

import (
	"cmp"
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
	// targets is 1 for each full node this edge relays to now.
	targets *prometheus.GaugeVec
	// leafMoves counts the edge's NATS link moved to another full node.
	leafMoves *prometheus.CounterVec
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
		targets: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tally_relay_target", Help: "1 for each full node this edge relays to now, by replica and the region it announced: those of its own region it heard ready within the last second, else those of the other regions (each request goes to the one its voter ranks first). A full node frozen, dead or catching up drops out within a second; region \"unheard\" is a node relayed to by the membership alone (no full node heard)."},
			[]string{"replica", "region"}),
		leafMoves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tally_relay_leaf_moves_total", Help: "Times this edge moved its NATS leaf connection to another full node, by reason: silent (no full node heard over it for a second: the full node it is on froze or died) or home (it was on another region's full node and one of its own region is ready)."},
			[]string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.batches, m.requests, m.batchSize, m.resends, m.answered, m.refusals, m.bytes, m.unansweredReqs, m.windowSecs, m.targets, m.leafMoves} {
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

// target moves the edge's target series from was to now.
func (m *Metrics) target(was, now []Target) {
	if m == nil {
		return
	}
	for _, t := range was {
		m.targets.DeleteLabelValues(t.Replica, cmp.Or(t.Region, "unheard"))
	}
	for _, t := range now {
		m.targets.WithLabelValues(t.Replica, cmp.Or(t.Region, "unheard")).Set(1)
	}
}

// LeafMoved counts a move of the edge's NATS leaf connection (reason:
// silent or home).
func (m *Metrics) LeafMoved(reason string) {
	if m != nil {
		m.leafMoves.WithLabelValues(reason).Inc()
	}
}
