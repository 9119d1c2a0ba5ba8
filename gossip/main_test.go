package gossip

import (
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"tally/hlc"
	"tally/internal/testwait"
	"tally/poll"
	"tally/state"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// memberlist and nats-server leave these behind briefly after a
		// clean shutdown; they end on their own.
		goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"),
	)
}

// member is one in-process gossip node over loopback.
type member struct {
	*Gossip
	st    *state.State
	clock *hlc.Clock
	reg   *prometheus.Registry
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testKey is the cluster key of the test members: clusters run
// authenticated, as they must outside tests.
var testKey = []byte("0123456789abcdef0123456789abcdef")

// startMember starts a gossip node named name in region, joining seeds,
// with an embedded NATS server (routes and gateways on loopback).
func startMember(t testing.TB, name, region string, seeds []string, mutate func(*Config)) *member {
	t.Helper()
	st, err := state.New(state.Config{Replica: name + "-r"})
	if err != nil {
		t.Fatal(err)
	}
	clock, err := hlc.New(hlc.Config{Replica: name + "-r"})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := Config{
		NodeName: name, Region: region, Replica: name + "-r", HTTPAddr: "127.0.0.1:1",
		BindAddr: "127.0.0.1:0", Join: seeds, Profile: "local", PushPull: 300 * time.Millisecond,
		NATSAddr: "127.0.0.1:0", NATSClusterAddr: "127.0.0.1:0", NATSGatewayAddr: "127.0.0.1:0", NATSLeafAddr: "127.0.0.1:0",
		State: st, Clock: clock, Registerer: reg, Logger: quiet, Keys: [][]byte{testKey},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	m := &member{Gossip: g, st: cfg.State, clock: cfg.Clock.(*hlc.Clock), reg: reg}
	if r, ok := cfg.Registerer.(*prometheus.Registry); ok {
		m.reg = r
	}
	t.Cleanup(func() { g.Close() })
	return m
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, d, what, cond)
}

func testPoll(id string) poll.Definition {
	return poll.Definition{ID: id, Question: "Which?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: time.Now().UnixMilli() - 1000, ClosesAt: time.Now().Add(time.Hour).UnixMilli(), GraceMs: 2000}
}

// create writes a poll definition at m, as the admin API does.
func (m *member) create(t testing.TB, d poll.Definition) {
	t.Helper()
	ts, err := m.clock.Now()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.st.Defs.PutPoll(d, ts); err != nil {
		t.Fatal(err)
	}
}

func (m *member) totals(id string) map[string]int64 {
	tot, _, err := m.st.Totals(id)
	if err != nil {
		return nil
	}
	return tot
}

// converged reports whether every member shows want for the poll.
func converged(ms []*member, id string, want map[string]int64) bool {
	for _, m := range ms {
		if !maps.Equal(m.totals(id), want) {
			return false
		}
	}
	return true
}

func counter(t *testing.T, m *member, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	_ = mfs
	switch name {
	case "dropped":
		return testutil.ToFloat64(m.m.dropped.WithLabelValues(labels...))
	case "merges":
		return testutil.ToFloat64(m.m.merges.WithLabelValues(labels...))
	}
	t.Fatalf("no counter %s", name)
	return 0
}
