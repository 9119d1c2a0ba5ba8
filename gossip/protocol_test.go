package gossip

import (
	"errors"
	"fmt"
	"log"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
)

// rawMember joins seed as a bare memberlist node with the cluster key and
// the given metadata: a node of another release, as far as the cluster
// can tell.
func rawMember(t *testing.T, name, metaJSON, seed string) *memberlist.Memberlist {
	t.Helper()
	mc := memberlist.DefaultLocalConfig()
	mc.Name, mc.BindAddr, mc.BindPort, mc.AdvertisePort = name, "127.0.0.1", 0, 0
	mc.Logger = log.New(&keyLog{}, "", 0)
	kr, err := memberlist.NewKeyring(nil, testKey)
	if err != nil {
		t.Fatal(err)
	}
	mc.Keyring = kr
	mc.Delegate = &metaOnly{b: []byte(metaJSON)}
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ml.Shutdown() })
	ml.Join([]string{seed}) // its state may be refused: what counts is what the seed keeps
	return ml
}

// metaOnly is a memberlist delegate that states metadata and nothing else.
type metaOnly struct{ b []byte }

func (d *metaOnly) NodeMeta(int) []byte                 { return d.b }
func (d *metaOnly) NotifyMsg([]byte)                    {}
func (d *metaOnly) GetBroadcasts(int, int) [][]byte     { return nil }
func (d *metaOnly) LocalState(bool) []byte              { return nil }
func (d *metaOnly) MergeRemoteState(buf []byte, _ bool) {}

// A member of the release before (Protocol-1) and one of the release
// after (Protocol+1) run beside this one; one two releases ahead is
// refused, counted and named in one log line however often it announces
// itself.
func TestMembersOutsideTheProtocolWindowAreRefused(t *testing.T) {
	logs := &keyLog{}
	a := startMember(t, "a", "eu-west", nil, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))
	})
	rawMember(t, "older", fmt.Sprintf(`{"region":"us-east","replica":"older-r","role":"full","proto":%d}`, Protocol-1), a.GossipAddr())
	rawMember(t, "newer", fmt.Sprintf(`{"region":"us-east","replica":"newer-r","role":"full","proto":%d}`, Protocol+1), a.GossipAddr())
	rawMember(t, "far", fmt.Sprintf(`{"region":"us-east","replica":"far-r","role":"full","proto":%d}`, Protocol+2), a.GossipAddr())
	waitFor(t, 10*time.Second, "the far member refused and counted", func() bool {
		return counter(t, a, "dropped", pathPushPull, "protocol") >= 1
	})
	waitFor(t, 10*time.Second, "the older and newer members taken", func() bool {
		names := map[string]bool{}
		for _, m := range a.Members() {
			names[m.Name] = true
		}
		return names["older"] && names["newer"]
	})
	// Several gossip rounds: the far member keeps announcing itself.
	waitFor(t, 10*time.Second, "the far member's alive messages refused again", func() bool {
		return counter(t, a, "dropped", pathPushPull, "protocol") >= 3
	})
	for _, m := range a.Members() {
		if m.Name == "far" {
			t.Fatalf("a member speaking protocol %d was taken by a node speaking %d", Protocol+2, Protocol)
		}
	}
	line := "member refused"
	if n := strings.Count(logs.String(), line); n != 1 {
		t.Fatalf("%d %q lines, want 1:\n%s", n, line, logs.String())
	}
	for _, want := range []string{"far", fmt.Sprintf("protocol %d", Protocol+2), "one release at a time"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the refusal does not say %q:\n%s", want, logs.String())
		}
	}
}

func TestProtocolWindow(t *testing.T) {
	for _, c := range []struct {
		meta string
		ok   bool
	}{
		{`{"region":"r","replica":"x","role":"full"}`, Protocol-ProtocolWindow <= 1},
		{fmt.Sprintf(`{"region":"r","replica":"x","role":"full","proto":%d}`, Protocol-2), false},
		{fmt.Sprintf(`{"region":"r","replica":"x","role":"full","proto":%d}`, Protocol-1), true},
		{fmt.Sprintf(`{"region":"r","replica":"x","role":"full","proto":%d}`, Protocol), true},
		{fmt.Sprintf(`{"region":"r","replica":"x","role":"edge","proto":%d}`, Protocol+1), true},
		{fmt.Sprintf(`{"region":"r","replica":"x","role":"full","proto":%d}`, Protocol+2), false},
		{`{"region":"r","replica":"x","role":"full","proto":-7}`, false},
		{`{"region":"r","replica":"x","role":"full","proto":"2"}`, false}, // unreadable: cannot say what it speaks
		{`not json`, false},
	} {
		gs := &Gossip{cfg: Config{NodeName: "self"}, log: quiet}
		m, err := newMetrics(prometheus.NewRegistry(), gs)
		if err != nil {
			t.Fatal(err)
		}
		gs.m = m
		g := &protocolGate{g: gs}
		err = g.NotifyAlive(&memberlist.Node{Name: "x", Meta: []byte(c.meta)})
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%t", c.meta, err, c.ok)
		}
		if err != nil && c.meta != `not json` && !strings.Contains(c.meta, `"2"`) && !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v is not ErrProtocol", c.meta, err)
		}
	}
}

// A join from members all outside the window is refused whole (memberlist
// then merges none of their state); one that brings a compatible member
// too goes ahead, the far ones refused one by one. A refusal is what
// ProtocolRefused reports.
func TestJoinsFromOutsideTheWindowAreNotMerged(t *testing.T) {
	gs := &Gossip{cfg: Config{NodeName: "self"}, log: quiet}
	m, err := newMetrics(prometheus.NewRegistry(), gs)
	if err != nil {
		t.Fatal(err)
	}
	gs.m = m
	gs.gate = &protocolGate{g: gs}
	node := func(name, meta string) *memberlist.Node { return &memberlist.Node{Name: name, Meta: []byte(meta)} }
	self := node("self", fmt.Sprintf(`{"region":"r","replica":"s","role":"full","proto":%d}`, Protocol))
	far := node("far", fmt.Sprintf(`{"region":"r","replica":"f","role":"full","proto":%d}`, Protocol+2))
	older := node("older", fmt.Sprintf(`{"region":"r","replica":"o","role":"full","proto":%d}`, Protocol-1))
	if ProtocolRefused(gs) {
		t.Fatal("refused before any refusal")
	}
	if err := gs.gate.NotifyMerge([]*memberlist.Node{far}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a join from a protocol-%d node alone: %v, want ErrProtocol", Protocol+2, err)
	}
	if !ProtocolRefused(gs) {
		t.Fatal("a refused join is not reported")
	}
	for _, peers := range [][]*memberlist.Node{{far, older}, {self, older}, {self}, {node("x", "not json")}} {
		if err := gs.gate.NotifyMerge(peers); err != nil {
			t.Fatalf("%d peers: %v, want the join to go ahead", len(peers), err)
		}
	}
}
