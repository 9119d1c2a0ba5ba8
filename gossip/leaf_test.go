package gossip

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestEdgeIsALeafNodeOfItsRegion: an edge opens no route, gateway or leaf
// port and its region's route mesh holds full nodes only; its embedded
// server is a leaf of one of its region's full nodes. Over that one
// connection it gets the other regions' counts, reaches a subscriber of
// another region and a queue group, and when its full node goes it
// connects to the other.
func TestEdgeIsALeafNodeOfItsRegion(t *testing.T) {
	if testing.Short() {
		t.Skip("a multi-node scenario of seconds: not in the -short inner loop")
	}
	slow := func(c *Config) { c.PushPull = time.Hour }
	a1 := startMember(t, "a1", "eu-west", nil, slow)
	a2 := startMember(t, "a2", "eu-west", []string{a1.GossipAddr()}, slow)
	b := startMember(t, "b", "us-east", []string{a1.GossipAddr()}, slow)
	e := startMember(t, "e", "eu-west", []string{a1.GossipAddr()}, func(c *Config) { slow(c); c.Role = RoleEdge })
	if e.self.NATSCluster != "" || e.self.NATSGateway != "" || e.self.NATSLeaf != "" {
		t.Fatalf("the edge announces NATS listeners: %+v", e.self)
	}
	waitFor(t, 20*time.Second, "the edge a leaf of one eu-west full node, a1 and a2 routed, b a gateway", func() bool {
		ra, _ := a1.Mesh().Links()
		re, ge := e.Mesh().Links()
		_, gb := b.Mesh().Links()
		return e.Mesh().LeafNodes() == 1 && a1.Mesh().LeafNodes()+a2.Mesh().LeafNodes() == 1 && ra == 1 && re == 0 && len(ge) == 0 && len(gb) == 1
	})

	// Counts from another region reach the edge over NATS.
	b.create(t, testPoll("p"))
	b.st.Count("p", "a", 3)
	waitFor(t, 10*time.Second, "b's count at the edge", func() bool { return converged([]*member{e}, "p", map[string]int64{"a": 3, "b": 0}) })
	if counter(t, e, "merges", pathNATS) == 0 {
		t.Fatal("the edge merged nothing from NATS")
	}

	// A request from the edge reaches a subscriber in another region and
	// a queue group, through the leaf connection and the gateway.
	if _, err := b.Mesh().Conn().Subscribe("test.b", func(m *nats.Msg) { m.Respond([]byte("b")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := a2.Mesh().Conn().QueueSubscribe("test.q", "full", func(m *nats.Msg) { m.Respond([]byte("a2")) }); err != nil {
		t.Fatal(err)
	}
	b.Mesh().Conn().Flush()
	a2.Mesh().Conn().Flush()
	request := func(subject string) string {
		var last error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			m, err := e.Mesh().Conn().Request(subject, nil, time.Second)
			if err == nil {
				return string(m.Data)
			}
			last = err
			time.Sleep(50 * time.Millisecond) // interest crosses the leaf and the gateway
		}
		t.Fatalf("request %s from the edge: %v", subject, last)
		return ""
	}
	if got := request("test.b"); got != "b" {
		t.Fatalf("test.b answered %q", got)
	}
	if got := request("test.q"); got != "a2" {
		t.Fatalf("test.q answered %q", got)
	}

	// The edge's full node goes: it becomes a leaf of the other.
	hub, other := a1, a2
	if a2.Mesh().LeafNodes() == 1 {
		hub, other = a2, a1
	}
	hub.Close()
	waitFor(t, 20*time.Second, "the edge a leaf of the other full node", func() bool {
		return e.Mesh().LeafNodes() == 1 && other.Mesh().LeafNodes() == 1
	})
}

// TestEdgeStartedFirstFindsItsFullNode: an edge up before any full node
// connects as a leaf once one joins.
func TestEdgeStartedFirstFindsItsFullNode(t *testing.T) {
	if testing.Short() {
		t.Skip("a multi-node scenario of seconds: not in the -short inner loop")
	}
	e := startMember(t, "e", "eu-west", nil, func(c *Config) { c.Role = RoleEdge })
	a := startMember(t, "a", "eu-west", []string{e.GossipAddr()}, nil)
	waitFor(t, 30*time.Second, "the edge a leaf of a", func() bool { return e.Mesh().LeafNodes() == 1 && a.Mesh().LeafNodes() == 1 })
	a.create(t, testPoll("p"))
	a.st.Count("p", "b", 2)
	waitFor(t, 10*time.Second, "a's count at the edge", func() bool { return converged([]*member{e}, "p", map[string]int64{"a": 0, "b": 2}) })
}
