package gossip

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"tally/crdt"
	"tally/gossip/gossiptest"
	"tally/hlc"
	"tally/state"
)

// TestThreeRegionsConverge: a poll created in one region appears in all;
// votes counted in every region reach every region.
func TestThreeRegionsConverge(t *testing.T) {
	a := startMember(t, "a", "eu-west", nil, nil)
	b := startMember(t, "b", "us-east", []string{a.GossipAddr()}, nil)
	c := startMember(t, "c", "ap-south", []string{a.GossipAddr()}, nil)
	all := []*member{a, b, c}
	waitFor(t, 10*time.Second, "three members", func() bool {
		return len(a.Members()) == 3 && len(b.Members()) == 3 && len(c.Members()) == 3
	})
	a.create(t, testPoll("p"))
	waitFor(t, 10*time.Second, "the poll everywhere", func() bool {
		for _, m := range all {
			if _, ok := m.st.Defs.Poll("p"); !ok {
				return false
			}
		}
		return true
	})
	for i, m := range all {
		for range i + 1 {
			m.st.Count("p", "a", 1)
		}
		m.st.Count("p", "b", 1)
	}
	want := map[string]int64{"a": 6, "b": 3}
	waitFor(t, 10*time.Second, fmt.Sprintf("totals %v everywhere", want), func() bool { return converged(all, "p", want) })
}

// startNATS runs a standalone NATS server on loopback for tests that take
// the NATS path down.
func startNATS(t testing.TB) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(s.Shutdown)
	return s
}

// TestMemberlistOnly: with NATS gone, push/pull still converges.
func TestMemberlistOnly(t *testing.T) {
	ns := startNATS(t)
	ext := func(c *Config) { c.NATSURL = ns.ClientURL() }
	a := startMember(t, "a", "eu-west", nil, ext)
	b := startMember(t, "b", "us-east", []string{a.GossipAddr()}, ext)
	c := startMember(t, "c", "ap-south", []string{a.GossipAddr()}, ext)
	all := []*member{a, b, c}
	a.create(t, testPoll("p"))
	waitFor(t, 10*time.Second, "the poll everywhere", func() bool { return converged(all, "p", map[string]int64{"a": 0, "b": 0}) })
	ns.Shutdown()
	waitFor(t, 10*time.Second, "nats down", func() bool { return !a.Mesh().Connected() && !b.Mesh().Connected() && !c.Mesh().Connected() })
	a.st.Count("p", "a", 2)
	b.st.Count("p", "b", 1)
	c.st.Count("p", "a", 1)
	want := map[string]int64{"a": 3, "b": 1}
	waitFor(t, 10*time.Second, "push/pull convergence", func() bool { return converged(all, "p", want) })
	if counter(t, a, "merges", pathPushPull) == 0 {
		t.Fatal("no push/pull merges counted")
	}
}

// TestNATSOnly: with memberlist partitioned, the NATS gateways carry
// definitions and counts.
func TestNATSOnly(t *testing.T) {
	var net gossiptest.Network
	wrap := func(c *Config) { c.WrapTransport = net.Wrap; c.PushPull = time.Hour }
	a := startMember(t, "a", "eu-west", nil, wrap)
	b := startMember(t, "b", "us-east", []string{a.GossipAddr()}, wrap)
	c := startMember(t, "c", "ap-south", []string{a.GossipAddr()}, wrap)
	all := []*member{a, b, c}
	waitFor(t, 10*time.Second, "gateways up", func() bool {
		for _, m := range all {
			if _, gws := m.Mesh().Links(); len(gws) < 2 {
				return false
			}
		}
		return true
	})
	net.Isolate(a.GossipAddr())
	net.Isolate(b.GossipAddr())
	net.Isolate(c.GossipAddr())
	b.create(t, testPoll("p"))
	waitFor(t, 10*time.Second, "the poll everywhere", func() bool { return converged(all, "p", map[string]int64{"a": 0, "b": 0}) })
	a.st.Count("p", "a", 1)
	b.st.Count("p", "b", 4)
	c.st.Count("p", "b", 1)
	want := map[string]int64{"a": 1, "b": 5}
	waitFor(t, 5*time.Second, "nats convergence", func() bool { return converged(all, "p", want) })
	if counter(t, a, "merges", pathPushPull) != 0 {
		t.Fatal("push/pull merged across the partition")
	}
}

// TestJoinMidPoll: a region that joins late gets the full state at once.
func TestJoinMidPoll(t *testing.T) {
	a := startMember(t, "a", "eu-west", nil, func(c *Config) { c.PushPull = time.Hour })
	b := startMember(t, "b", "us-east", []string{a.GossipAddr()}, func(c *Config) { c.PushPull = time.Hour })
	a.create(t, testPoll("p"))
	a.st.Count("p", "a", 7)
	b.create(t, testPoll("q"))
	b.st.Count("q", "b", 3)
	waitFor(t, 10*time.Second, "a and b agree", func() bool {
		return converged([]*member{a, b}, "p", map[string]int64{"a": 7, "b": 0}) && converged([]*member{a, b}, "q", map[string]int64{"a": 0, "b": 3})
	})
	// The newcomer's join is a push/pull: it has everything when Start
	// returns, without waiting for a refresh.
	c := startMember(t, "c", "ap-south", []string{b.GossipAddr()}, func(c *Config) { c.PushPull = time.Hour; c.HeartbeatEvery = time.Hour })
	if !converged([]*member{c}, "p", map[string]int64{"a": 7, "b": 0}) || !converged([]*member{c}, "q", map[string]int64{"a": 0, "b": 3}) {
		t.Fatalf("newcomer after join: p=%v q=%v", c.totals("p"), c.totals("q"))
	}
}

// TestKeyRequired: a node without the cluster's key, or with another key,
// cannot join.
func TestKeyRequired(t *testing.T) {
	key := []byte("0123456789abcdef")
	a := startMember(t, "a", "eu-west", nil, func(c *Config) { c.Keys = [][]byte{key} })
	for _, k := range [][][]byte{nil, {[]byte("fedcba9876543210")}} {
		st, _ := state.New(state.Config{Replica: "x-r"})
		clock, _ := hlc.New(hlc.Config{Replica: "x-r"})
		g, err := New(Config{NodeName: "x", Region: "eu-west", Replica: "x-r", BindAddr: "127.0.0.1:0", Profile: "local",
			NATSAddr: "127.0.0.1:0", Keys: k, State: st, Clock: clock, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Start(); err != nil {
			t.Fatal(err)
		}
		if n, err := g.ml.Join([]string{a.GossipAddr()}); err == nil || n != 0 {
			t.Errorf("key %q: joined %d (err %v)", k, n, err)
		}
		g.Close()
		if len(a.Members()) != 1 {
			t.Errorf("key %q: the keyed node lists %d members", k, len(a.Members()))
		}
	}
}

// TestGarbageDropped: malformed messages on either path are dropped and
// counted; the state does not change.
func TestGarbageDropped(t *testing.T) {
	a := startMember(t, "a", "eu-west", nil, nil)
	a.create(t, testPoll("p"))
	a.st.Count("p", "a", 2)
	// The member's subscription must have reached the server first.
	waitFor(t, 10*time.Second, "nats connected", a.Mesh().Connected)
	a.Mesh().flush(time.Second)
	nc, err := nats.Connect(a.mesh.emb.srv.ClientURL(), nats.UserInfo(natsUser, natsPasswords(a.cfg.Keys)[0])) // an insider
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	good, _ := Encode(&Message{Kind: KindDelta, Replica: "z", Region: "r", Sent: hlc.Timestamp{Wall: 1}})
	garbage := [][]byte{nil, []byte("hello"), []byte(wireMagic), append([]byte(wireMagic), 9, 0), good[:len(good)-1], append(good, 0)}
	// Garbage sealed with the cluster key (a member gone wrong) fails to
	// decode; anything not sealed with it never gets that far.
	for _, g := range garbage {
		if err := nc.Publish(a.subject, a.keys.seal(g)); err != nil {
			t.Fatal(err)
		}
	}
	unsealed := append(garbage[1:], good)
	for _, g := range unsealed {
		if err := nc.Publish(a.subject, g); err != nil {
			t.Fatal(err)
		}
	}
	nc.Flush()
	waitFor(t, 5*time.Second, "all nats garbage counted", func() bool {
		return counter(t, a, "dropped", pathNATS, "malformed") == float64(len(garbage)) &&
			counter(t, a, "dropped", pathNATS, "unauthenticated") == float64(len(unsealed))
	})
	// A well-formed message from a clock far ahead is dropped as skewed.
	ahead, _ := Encode(&Message{Kind: KindDelta, Replica: "z", Region: "r", Sent: hlc.Timestamp{Wall: time.Now().Add(time.Hour).UnixMilli()},
		Polls: []PollUpdate{{ID: "p", Tally: func() *crdt.Tally { t := crdt.NewTally(); t.Add("z", "b", 100); return t }()}}})
	if err := nc.Publish(a.subject, a.keys.seal(ahead)); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	waitFor(t, 5*time.Second, "the skewed message counted", func() bool { return counter(t, a, "dropped", pathNATS, "skew") == 1 })
	d := &delegate{g: a.Gossip}
	for _, g := range garbage[1:] {
		d.MergeRemoteState(a.keys.seal(g), false)
		d.MergeRemoteState(g, false)
	}
	if got := counter(t, a, "dropped", pathPushPull, "malformed"); got != float64(len(garbage)-1) {
		t.Fatalf("push/pull garbage counted %v, want %d", got, len(garbage)-1)
	}
	if got := counter(t, a, "dropped", pathPushPull, "unauthenticated"); got != float64(len(garbage)-1) {
		t.Fatalf("unsealed push/pull counted %v, want %d", got, len(garbage)-1)
	}
	if tot := a.totals("p"); tot["a"] != 2 || tot["b"] != 0 {
		t.Fatalf("state changed: %v", tot)
	}
}

// TestHealedPartitionRejoins: members declared dead during a partition
// come back when it heals (memberlist alone would never call them again),
// and push/pull merges what both sides counted. NATS is down throughout.
func TestHealedPartitionRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("a multi-node scenario of seconds: not in the -short inner loop")
	}
	ns := startNATS(t)
	var net gossiptest.Network
	opts := func(c *Config) { c.NATSURL = ns.ClientURL(); c.WrapTransport = net.Wrap }
	a := startMember(t, "a", "eu-west", nil, opts)
	b := startMember(t, "b", "us-east", []string{a.GossipAddr()}, opts)
	c := startMember(t, "c", "ap-south", []string{a.GossipAddr()}, opts)
	all := []*member{a, b, c}
	a.create(t, testPoll("p"))
	waitFor(t, 10*time.Second, "the poll everywhere", func() bool { return converged(all, "p", map[string]int64{"a": 0, "b": 0}) })
	ns.Shutdown()

	net.Isolate(c.GossipAddr())
	waitFor(t, 20*time.Second, "c declared dead", func() bool { return len(a.Members()) == 2 && len(c.Members()) == 1 })
	a.st.Count("p", "a", 3)
	c.st.Count("p", "b", 2)
	// The partition outlasts memberlist's GossipToTheDeadTime (500ms in
	// the local profile), after which only the reconnect loop brings c
	// back: the scenario's length, not a wait for a condition.
	time.Sleep(time.Second)
	net.Heal()
	waitFor(t, 20*time.Second, "c back", func() bool { return len(a.Members()) == 3 && len(c.Members()) == 3 })
	waitFor(t, 10*time.Second, "convergence after the heal", func() bool { return converged(all, "p", map[string]int64{"a": 3, "b": 2}) })
}
