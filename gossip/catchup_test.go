package gossip

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tally/crdt"
	"tally/hlc"
	"tally/state"
)

// With NATS down, ballots still reach every region: the record counts in
// push/pull show what is missing, and the catch-up asks over memberlist.
// A voter's change of mind in another region is then counted once.
func TestBallotsCatchUpOverMemberlist(t *testing.T) {
	ns := startNATS(t)
	ext := func(c *Config) { c.NATSURL = ns.ClientURL() }
	a := startMember(t, "a", "eu-west", nil, ext)
	b := startMember(t, "b", "us-east", []string{a.GossipAddr()}, ext)
	a.create(t, testPoll("p"))
	waitFor(t, 10*time.Second, "the poll at b", func() bool { return b.totals("p") != nil })
	ns.Shutdown()
	waitFor(t, 10*time.Second, "nats down", func() bool { return !a.Mesh().Connected() && !b.Mesh().Connected() })

	vote := func(m *member, seq uint64, option string, wall int64) {
		m.st.AddRecords("p", 1)
		m.st.Vote("p", crdt.Ballot{Seq: seq, Wall: wall, Voter: m.st.Hash("v"), Idem: m.st.Hash(fmt.Sprint("k", wall)), Option: option, Eligible: true})
	}
	now := time.Now().UnixMilli()
	vote(a, 1, "a", now)   // v votes a at eu-west…
	vote(b, 1, "b", now+5) // …then b at us-east
	want := map[string]int64{"a": 0, "b": 1}
	waitFor(t, 20*time.Second, "one vote for v everywhere", func() bool { return converged([]*member{a, b}, "p", want) })
	if counter(t, a, "merges", pathPushPull) == 0 || testutil.ToFloat64(a.m.ballots.WithLabelValues(pathCatchUp)) == 0 {
		t.Fatal("the ballot did not come by memberlist catch-up")
	}
}

// A port picked free (configured as 0) and taken by another socket before
// the embedded server binds it: the start notices at once (the server's
// fatal line, not a 10 s timeout) and tries again on new ports.
func TestEmbeddedNATSRetriesATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	st, _ := state.New(state.Config{Replica: "r"})
	clock, _ := hlc.New(hlc.Config{Replica: "r"})
	g, err := New(Config{NodeName: "n", Region: "eu-west", Replica: "r", Keys: [][]byte{testKey}, State: st, Clock: clock,
		Registerer: prometheus.NewRegistry(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	g.mesh.want = [4]string{"127.0.0.1:0", "", "", ""}
	g.cfg.NATSAddr = taken.Addr().String() // as if another socket took the picked port
	start := time.Now()
	emb, err := g.mesh.startEmbedded(links{})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.shutdown()
	if g.cfg.NATSAddr == taken.Addr().String() {
		t.Fatal("started on the taken port?")
	}
	if took := time.Since(start); took > 9*time.Second {
		t.Logf("the retry waited for the timeout (%s), not for the fatal line", took)
	}
}
