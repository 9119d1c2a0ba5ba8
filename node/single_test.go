package node

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"tally/gossip"
	"tally/hlc"
	"tally/state"
)

// TestKeylessNodeMergesNothing: the README's node (no --gossip-key, the
// default addresses) is a single node (issue 25, item 1). Gossip listens on
// loopback only, a stranger's memberlist join and push/pull carrying a
// forged count and a rewritten question change nothing, and its NATS
// client port refuses a connection without the process's own password.
func TestKeylessNodeMergesNothing(t *testing.T) {
	tn := startNode(t, t.TempDir(), func(c *Config) { c.GossipKey, c.GossipAddr = "", ":0" })
	gaddr := tn.gossip.GossipAddr()
	if host, _, _ := net.SplitHostPort(gaddr); !net.ParseIP(host).IsLoopback() {
		t.Fatalf("a key-less node's gossip listens on %s, want loopback", gaddr)
	}
	tn.createPoll(t, "p")
	tn.castVote(t, "p", "a", "v1", "k1")
	before := tn.totals(t, "p")
	def, _ := tn.state.Defs.Poll("p")

	// The stranger: a cluster of its own without a key, holding the poll
	// with a forged count and question.
	st, err := state.New(state.Config{Replica: "stranger-1"})
	if err != nil {
		t.Fatal(err)
	}
	forged := def
	forged.Question = "Rewritten?"
	if _, err := st.Defs.PutPoll(forged, hlc.Timestamp{Wall: time.Now().Add(time.Second).UnixMilli(), Replica: "stranger-1"}); err != nil {
		t.Fatal(err)
	}
	st.Count("p", "b", 999_999)
	clock, _ := hlc.New(hlc.Config{Replica: "stranger-1"})
	g, err := gossip.New(gossip.Config{NodeName: "stranger", Region: "nowhere", Replica: "stranger-1", HTTPAddr: "127.0.0.1:1",
		BindAddr: "127.0.0.1:0", Profile: "local", PushPull: 100 * time.Millisecond, AllowInsecure: true, Join: []string{gaddr},
		NATSAddr: "127.0.0.1:0", State: st, Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_ = g.Start() // the join is refused; the stranger may or may not call that an error
	defer g.Close()
	waitFor(t, func() bool { return counterValue(t, tn, "tally_gossip_dropped_total", "no_key") >= 1 })
	if got := tn.totals(t, "p"); got["b"] != before["b"] || got["_total"] != before["_total"] {
		t.Fatalf("a stranger changed a key-less node's counts: %v, before %v", got, before)
	}
	if d, _ := tn.state.Defs.Poll("p"); d.Question != def.Question {
		t.Fatalf("a stranger rewrote the question: %q", d.Question)
	}
	if u := tn.gossip.Mesh().EmbeddedURL(); u == "" {
		t.Fatal("no embedded NATS")
	} else if _, err := nats.Connect(u); err == nil {
		t.Fatal("a key-less node's NATS took a connection without a password")
	}
}
