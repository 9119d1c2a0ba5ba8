package gossip

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"tally/gossip/gossiptest"
	"tally/hlc"
	"tally/state"
)

// TestRandomSchedules runs seeded random schedules of votes, partitions
// (memberlist and NATS both cut for a node), heals and restarts across
// three nodes, then heals everything: every node must end with the same
// tally, and each replica's entries must be exactly what that replica
// counted. TALLY_GOSSIP_SEED=n replays one schedule.
func TestRandomSchedules(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if s := os.Getenv("TALLY_GOSSIP_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []uint64{n}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runSchedule(t, seed) })
	}
}

type simNode struct {
	*member
	name  string
	gen   int
	proxy *gossiptest.Proxy
	state *state.State
	clock *hlc.Clock
	own   map[string]int64 // what this replica counted, by option
	recs  uint64           // ledger records this replica reported
}

func runSchedule(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	ns := startNATS(t)
	var network gossiptest.Network
	nodes := make([]*simNode, 3)
	start := func(i int, seeds []string) {
		n := nodes[i]
		m := startMember(t, fmt.Sprintf("%s-g%d", n.name, n.gen), []string{"eu-west", "us-east", "ap-south"}[i], seeds, func(c *Config) {
			c.Replica = n.name + "-r"
			c.NATSURL = "nats://" + n.proxy.Addr()
			c.WrapTransport = network.Wrap
			c.PushPull = 200 * time.Millisecond
			// The same state and clock across restarts, as after a ledger replay.
			c.State, c.Clock = n.state, n.clock
		})
		n.member = m
	}
	for i := range nodes {
		p, err := gossiptest.NewProxy(ns.Addr().String(), 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		name := fmt.Sprintf("n%d", i)
		st, _ := state.New(state.Config{Replica: name + "-r"})
		clock, _ := hlc.New(hlc.Config{Replica: name + "-r"})
		nodes[i] = &simNode{name: name, proxy: p, own: map[string]int64{}, state: st, clock: clock}
		var seeds []string
		if i > 0 {
			seeds = []string{nodes[0].GossipAddr()}
		}
		start(i, seeds)
	}
	nodes[0].create(t, testPoll("p"))
	waitFor(t, 10*time.Second, "the poll everywhere", func() bool {
		for _, n := range nodes {
			if _, ok := n.st.Poll("p"); !ok {
				return false
			}
		}
		return true
	})

	options := []string{"a", "b"}
	var log []string
	for step := range 30 {
		n := nodes[rng.IntN(len(nodes))]
		switch r := rng.IntN(100); {
		case r < 50:
			o := options[rng.IntN(2)]
			if other := options[1-rng.IntN(2)]; other != o && n.own[other] > 0 && rng.IntN(4) == 0 {
				n.st.Count("p", other, -1) // a voter changed their mind
				n.own[other]--
			}
			k := int64(1 + rng.IntN(5))
			n.st.Count("p", o, k)
			n.st.AddRecords("p", uint64(k))
			n.own[o] += k
			n.recs += uint64(k)
			log = append(log, fmt.Sprintf("%d:%s+%d %s", step, n.name, k, o))
		case r < 65:
			network.Isolate(n.GossipAddr())
			n.proxy.Cut()
			log = append(log, fmt.Sprintf("%d:cut %s", step, n.name))
		case r < 75:
			network.Heal()
			for _, m := range nodes {
				m.proxy.Restore()
			}
			log = append(log, fmt.Sprintf("%d:heal", step))
		case r < 85:
			network.Release(n.GossipAddr())
			n.proxy.Restore()
			n.Close()
			n.gen++
			var seeds []string
			for _, m := range nodes {
				if m != n {
					seeds = append(seeds, m.GossipAddr())
				}
			}
			start(indexOf(nodes, n), seeds)
			log = append(log, fmt.Sprintf("%d:restart %s", step, n.name))
		default:
			// Let the schedule run for a while: part of the schedule, not
			// a wait for any condition.
			d := time.Duration(20+rng.IntN(300)) * time.Millisecond
			time.Sleep(d)
			log = append(log, fmt.Sprintf("%d:run %v", step, d))
		}
	}
	network.Heal()
	for _, n := range nodes {
		n.proxy.Restore()
	}
	want := map[string]int64{}
	for _, n := range nodes {
		for o, v := range n.own {
			want[o] += v
		}
	}
	for _, o := range options {
		want[o] += 0
	}
	deadline := time.Now().Add(20 * time.Second)
	for !sameTallies(nodes, want) {
		if time.Now().After(deadline) {
			for _, n := range nodes {
				tally, _ := n.st.Tally("p")
				t.Logf("%s: %v records %v", n.name, n.totals("p"), tally.RecordCounts())
				for _, o := range options {
					c := tally.Counter(o)
					t.Logf("  %s: P %v N %v", o, c.P, c.N)
				}
				t.Logf("  own %v recs %d", n.own, n.recs)
			}
			t.Fatalf("seed %d: no convergence to %v; schedule: %v", seed, want, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sameTallies reports whether every node shows want and holds, for every
// replica, exactly that replica's own counts.
func sameTallies(nodes []*simNode, want map[string]int64) bool {
	for _, n := range nodes {
		if !maps.Equal(n.totals("p"), want) {
			return false
		}
		tally, err := n.st.Tally("p")
		if err != nil {
			return false
		}
		for _, m := range nodes {
			replica := m.name + "-r"
			if tally.Records(replica) != m.recs {
				return false
			}
			for o, v := range m.own {
				c := tally.Counter(o)
				if int64(c.P.Get(replica))-int64(c.N.Get(replica)) != v {
					return false
				}
			}
		}
	}
	return true
}

func indexOf(nodes []*simNode, n *simNode) int {
	for i, m := range nodes {
		if m == n {
			return i
		}
	}
	return -1
}
