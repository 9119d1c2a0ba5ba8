package gossip

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Paths a message travels.
const (
	pathNATS     = "nats"
	pathPushPull = "pushpull"
)

type metrics struct {
	bytes     *prometheus.CounterVec // path, direction
	messages  *prometheus.CounterVec // path, direction
	merges    *prometheus.CounterVec // path: messages that changed the state
	dropped   *prometheus.CounterVec // path, reason
	published prometheus.Counter     // deltas published (heartbeats excluded)
	restarts  prometheus.Counter     // embedded NATS restarts to add routes or gateways
	refused   *prometheus.CounterVec // port, reason: connections the embedded NATS refused
	ballots   *prometheus.CounterVec // path: other replicas' ballots merged
	catchUp   *prometheus.CounterVec // outcome: catch-up requests for missing ballots
	// republished counts ballots of gone replicas sent on from their
	// buddy's copies (steward.go).
	republished prometheus.Counter
	// keyMismatch counts memberlist messages another gossip key sealed
	// (received) and joins a seed could not read (sent): keys.go.
	keyMismatch *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, g *Gossip) (*metrics, error) {
	m := &metrics{
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_gossip_bytes_total", Help: "Gossip bytes by path (nats, pushpull) and direction (in, out).",
		}, []string{"path", "direction"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_gossip_messages_total", Help: "Gossip messages by path and direction.",
		}, []string{"path", "direction"}),
		merges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_gossip_merges_total", Help: "Received gossip messages that changed this node's state, by path.",
		}, []string{"path"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_gossip_dropped_total", Help: "Received gossip messages or parts dropped, by path and reason (unauthenticated, malformed, skew, unknown_poll, rejected; short_certificate: a reconciled certificate leaving out records this node knows of, not applied; protocol: a member or join speaking a cluster protocol outside this node's window, refused).",
		}, []string{"path", "reason"}),
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_gossip_deltas_published_total", Help: "Deltas of this replica's entries published on NATS.",
		}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_gossip_nats_restarts_total", Help: "Restarts of the embedded NATS server to connect routes or gateways learned later.",
		}),
		ballots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_gossip_ballots_total", Help: "Ballots of other replicas (votes' effects on voter state) merged, by path (nats, catchup).",
		}, []string{"path"}),
		catchUp: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_gossip_catchup_total", Help: "Catch-up requests for ballots this node lacked, by outcome (fetched: a batch arrived; failed: no answer or no progress).",
		}, []string{"outcome"}),
		republished: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_gossip_republished_ballots_total", Help: "Ballots of a gone full node (not a live member) this node sent on from the copies it holds as its buddy: the votes that node acknowledged whose own gossip never went out.",
		}),
		keyMismatch: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_gossip_key_mismatch_total", Help: "Gossip messages between this node and another that the other's key sealed (direction received: this node could not read them) or that a seed could not read (sent: a join refused): the two nodes' --gossip-key differ, and neither is a member of the other's cluster.",
		}, []string{"direction"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_nats_refused_total", Help: "Connections to or from the embedded NATS server that failed authentication (reason auth: no or a wrong credential) or TLS (reason tls: no or an untrusted certificate), by port (client, route, gateway, leaf).",
		}, []string{"port", "reason"}),
	}
	members := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tally_gossip_members", Help: "Live cluster members seen by memberlist, this node included.",
	}, func() float64 { return float64(len(g.Members())) })
	expected := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tally_gossip_expected_members", Help: "The members this node expects to see (--expect-members; 0: not set): tally_gossip_members below it is a split or a lost node.",
	}, func() float64 { return float64(g.cfg.ExpectMembers) })
	fullMembers := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tally_gossip_full_members", Help: "Live full nodes seen by memberlist, this node included if it is one (edges apart).",
	}, func() float64 { return float64(fullMembers(g)) })
	expectedFull := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tally_gossip_expected_full_members", Help: "The full nodes this node expects to see (--expect-full-nodes; 0: not set): tally_gossip_full_members below it is a lost full node. Edges, which an autoscaler adds and removes, are not counted.",
	}, func() float64 { return float64(g.cfg.ExpectFull) })
	staleness := &stalenessCollector{g: g, desc: prometheus.NewDesc("tally_gossip_staleness_seconds",
		"Age of the newest state heard from each replica.", []string{"replica", "region"}, nil)}
	for _, c := range []prometheus.Collector{m.bytes, m.messages, m.merges, m.dropped, m.published, m.restarts, m.refused, m.ballots, m.catchUp, m.republished, m.keyMismatch, members, expected, fullMembers, expectedFull, staleness} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// stalenessCollector reports per-replica staleness at scrape time.
type stalenessCollector struct {
	g    *Gossip
	desc *prometheus.Desc
}

func (c *stalenessCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stalenessCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.g.Staleness() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(r.StalenessMs)/1000, r.Replica, r.Region)
	}
}

// fullMembers counts the live full members g sees.
func fullMembers(g *Gossip) int {
	n := 0
	for _, m := range g.Members() {
		if m.Role == RoleFull {
			n++
		}
	}
	return n
}
