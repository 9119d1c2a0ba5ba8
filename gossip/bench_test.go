package gossip

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"tally/gossip/gossiptest"
)

// These benchmarks measure and print; they assert nothing about time.
// Run them with ./bench/gossip.sh (go test -run '^$' -bench . -benchtime 1x).

// BenchmarkGossipBytes: payload bytes per second each node sends and
// receives (NATS deltas and refreshes + push/pull full state; NATS protocol
// and gateway framing not included), by cluster size and number
// of open polls, with every node counting votes in every poll all the time
// (the busiest case) and idle. Every node is its own region (gateways
// between all). Push/pull every 10 s; the window is 10 s.
func BenchmarkGossipBytes(b *testing.B) {
	const window = 10 * time.Second
	for _, nodes := range []int{3, 5, 10} {
		for _, polls := range []int{1, 100} {
			for _, busy := range []bool{true, false} {
				name := fmt.Sprintf("nodes=%d/polls=%d/busy=%v", nodes, polls, busy)
				b.Run(name, func(b *testing.B) {
					for range b.N {
						out, in := measureBytes(b, nodes, polls, busy, window)
						b.ReportMetric(out, "out-B/s/node")
						b.ReportMetric(in, "in-B/s/node")
					}
				})
			}
		}
	}
}

func measureBytes(b *testing.B, n, polls int, busy bool, window time.Duration) (out, in float64) {
	var ms []*member
	for i := range n {
		var seeds []string
		if i > 0 {
			seeds = []string{ms[0].GossipAddr()}
		}
		ms = append(ms, startMember(b, fmt.Sprintf("n%d", i), fmt.Sprintf("region-%d", i), seeds, func(c *Config) { c.PushPull = 10 * time.Second }))
	}
	for p := range polls {
		ms[p%n].create(b, testPoll(fmt.Sprintf("p%d", p)))
	}
	waitFor(b, 30*time.Second, "every poll everywhere", func() bool {
		for _, m := range ms {
			if len(m.st.Defs.Polls()) != polls {
				return false
			}
		}
		return true
	})
	total := func(direction string) float64 {
		var sum float64
		for _, m := range ms {
			sum += testutil.ToFloat64(m.m.bytes.WithLabelValues(pathNATS, direction)) + testutil.ToFloat64(m.m.bytes.WithLabelValues(pathPushPull, direction))
		}
		return sum
	}
	outBefore, inBefore := total("out"), total("in")
	start := time.Now()
	for time.Since(start) < window {
		if busy {
			for _, m := range ms {
				for p := range polls {
					m.st.Count(fmt.Sprintf("p%d", p), "a", 1)
				}
			}
		}
		time.Sleep(50 * time.Millisecond) // vote pacing: two changes per publish period
	}
	secs := time.Since(start).Seconds()
	out = (total("out") - outBefore) / secs / float64(n)
	in = (total("in") - inBefore) / secs / float64(n)
	for _, m := range ms {
		m.Close()
	}
	return out, in
}

// BenchmarkConvergenceAfterHeal: one of three nodes is cut off (memberlist
// and NATS) for 3 s while both sides count votes; from the heal, how long
// until every node shows the same totals. With NATS, and with NATS down
// (memberlist push/pull every 2 s; the cut outlasts the failure detector,
// so the reconnect loop brings the node back).
func BenchmarkConvergenceAfterHeal(b *testing.B) {
	for _, withNATS := range []bool{true, false} {
		b.Run(fmt.Sprintf("nats=%v", withNATS), func(b *testing.B) {
			var took []time.Duration
			for range b.N {
				took = append(took, healOnce(b, withNATS))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
			b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
		})
	}
}

func healOnce(b *testing.B, withNATS bool) time.Duration {
	ns := startNATS(b)
	var network gossiptest.Network
	var proxies []*gossiptest.Proxy
	var ms []*member
	for i := range 3 {
		p, err := gossiptest.NewProxy(ns.Addr().String(), 0)
		if err != nil {
			b.Fatal(err)
		}
		proxies = append(proxies, p)
		var seeds []string
		if i > 0 {
			seeds = []string{ms[0].GossipAddr()}
		}
		ms = append(ms, startMember(b, fmt.Sprintf("n%d", i), fmt.Sprintf("r%d", i), seeds, func(c *Config) {
			c.NATSURL, c.WrapTransport, c.PushPull = "nats://"+p.Addr(), network.Wrap, 2*time.Second
		}))
	}
	ms[0].create(b, testPoll("p"))
	waitFor(b, 10*time.Second, "the poll everywhere", func() bool { return converged(ms, "p", map[string]int64{"a": 0, "b": 0}) })
	if !withNATS {
		ns.Shutdown()
	}
	network.Isolate(ms[2].GossipAddr())
	proxies[2].Cut()
	for range 30 {
		ms[0].st.Count("p", "a", 1)
		ms[2].st.Count("p", "b", 1)
		time.Sleep(100 * time.Millisecond) // the partition lasts 3 s
	}
	network.Heal()
	proxies[2].Restore()
	healed := time.Now()
	waitFor(b, 60*time.Second, "convergence", func() bool { return converged(ms, "p", map[string]int64{"a": 30, "b": 30}) })
	took := time.Since(healed)
	for _, m := range ms {
		m.Close()
	}
	for _, p := range proxies {
		p.Close()
	}
	return took
}
