package gossip

import (
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"tally/crdt"
	"tally/gossip/gossiptest"
	"tally/hlc"
	"tally/ledger"
	"tally/state"
)

// TestRandomSchedules runs seeded random schedules of votes — voters
// changing their mind and clients retrying at any region — partitions
// (memberlist and NATS both cut for a node), heals and restarts across
// three nodes, then heals everything: every node must end with the tally
// certification computes from the three ledgers (ballots lost to a
// partition are fetched by catch-up), and each replica's record count.
// TALLY_GOSSIP_SEED=n replays one schedule.
func TestRandomSchedules(t *testing.T) {
	if testing.Short() {
		t.Skip("a multi-node scenario of seconds: not in the -short inner loop")
	}
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
	chain []ledger.Record // this replica's ledger
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
		nodes[i] = &simNode{name: name, proxy: p, state: st, clock: clock}
		var seeds []string
		if i > 0 {
			seeds = []string{nodes[0].GossipAddr()}
		}
		start(i, seeds)
	}
	nodes[0].create(t, testPoll("p"))
	waitFor(t, 10*time.Second, "the poll everywhere", func() bool {
		for _, n := range nodes {
			if _, ok := n.st.Defs.Poll("p"); !ok {
				return false
			}
		}
		return true
	})

	options := []string{"a", "b"}
	type request struct{ voter, option, idem string }
	var sent []request
	var log []string
	for step := range 30 {
		n := nodes[rng.IntN(len(nodes))]
		switch r := rng.IntN(100); {
		case r < 50:
			k := 1 + rng.IntN(5)
			for j := range k {
				v := request{fmt.Sprint("v", rng.IntN(8)), options[rng.IntN(2)], fmt.Sprintf("k%d-%d", step, j)}
				if len(sent) > 0 && rng.IntN(4) == 0 {
					v = sent[rng.IntN(len(sent))] // a retry, perhaps at another region
				}
				sent = append(sent, v)
				if slices.ContainsFunc(n.chain, func(r ledger.Record) bool { return r.Idem == v.idem }) {
					continue // this region's own index answers duplicate
				}
				ts, _ := n.clock.Now()
				rec := ledger.Record{Poll: "p", Replica: n.name + "-r", Seq: uint64(len(n.chain) + 1), Wall: ts.Wall, Logical: ts.Logical,
					Voter: v.voter, Option: v.option, Idem: v.idem, Trust: 1, Counted: true, IPHash: "00"}
				if len(n.chain) > 0 {
					rec.Prev = n.chain[len(n.chain)-1].Hash()
				}
				n.chain = append(n.chain, rec)
				n.st.AddRecords("p", 1)
				n.st.Vote("p", crdt.Ballot{Seq: rec.Seq, Wall: rec.Wall, Logical: rec.Logical, Voter: n.st.Hash(rec.Voter),
					Idem: n.st.Hash(rec.Idem), Option: rec.Option, Eligible: true})
			}
			log = append(log, fmt.Sprintf("%d:%s+%d", step, n.name, k))
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
	var streams []iter.Seq2[ledger.Record, error]
	for _, n := range nodes {
		streams = append(streams, func(yield func(ledger.Record, error) bool) {
			for _, r := range n.chain {
				if !yield(r, nil) {
					return
				}
			}
		})
	}
	exact, err := ledger.ReconcileWith(ledger.ReconcileConfig{Poll: "p"}, streams...)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for _, o := range options {
		want[o] = int64(exact.Totals[o])
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
				have, _ := n.st.BallotsHave("p")
				t.Logf("  records %d, ballots held %v", len(n.chain), have)
			}
			t.Fatalf("seed %d: no convergence to %v; schedule: %v", seed, want, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sameTallies reports whether every node shows want and every replica's
// record count.
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
			if tally.Records(replica) != uint64(len(m.chain)) {
				return false
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
