package relay

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"tally/internal/testnats"
	"tally/internal/testseal"
	"tally/internal/testwait"
)

func TestPresenceRoundTrip(t *testing.T) {
	for _, p := range []presence{
		{Replica: "eu-west-1a2b3c4d", Region: "eu-west", Ready: true},
		{Replica: "r", Region: "", Ready: false},
		{Replica: strings.Repeat("r", maxName), Region: strings.Repeat("g", maxName), Ready: true},
	} {
		got, err := decodePresence(appendPresence(nil, p))
		if err != nil || got != p {
			t.Fatalf("%+v came back as %+v (%v)", p, got, err)
		}
	}
}

func TestDecodePresenceRefusesHostileInput(t *testing.T) {
	good := appendPresence(nil, presence{Replica: "eu-1", Region: "eu", Ready: true})
	for name, b := range map[string][]byte{
		"empty":            nil,
		"a batch":          AppendBatch(nil, nil),
		"truncated":        good[:len(good)-1],
		"trailing bytes":   append(bytes.Clone(good), 0),
		"ready flag 2":     append([]byte(presenceMagic+"\x02"), good[len(presenceMagic)+1:]...),
		"no replica":       appendPresence(nil, presence{Region: "eu"}),
		"replica too long": appendPresence(nil, presence{Replica: strings.Repeat("r", maxName+1)}),
		"huge length":      []byte(presenceMagic + "\x01\xff\xff\xff\xff\xff\xff\xff\xff\x7f"),
	} {
		if _, err := decodePresence(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// Whatever bytes arrive, the decoder returns a bounded presence or an
// error, never a panic, and what it accepts encodes back to the same.
func FuzzDecodePresence(f *testing.F) {
	f.Add(appendPresence(nil, presence{Replica: "eu-1", Region: "eu", Ready: true}))
	f.Add([]byte(presenceMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePresence(b)
		if err != nil {
			return
		}
		if p.Replica == "" || len(p.Replica) > maxName || len(p.Region) > maxName {
			t.Fatalf("decoded %+v", p)
		}
		if !bytes.Equal(appendPresence(nil, p), b) {
			t.Fatalf("%+v encodes to other bytes", p)
		}
	})
}

// freezable is a full node that can freeze, as a SIGSTOPped process
// does: while frozen it answers nothing and announces nothing (its
// presence beat asks Ready, which waits for the thaw).
type freezable struct {
	*fullNode
	mu     sync.RWMutex // held for writing while frozen
	ready  atomic.Bool
	frozen atomic.Bool
}

func (f *freezable) freeze() { f.mu.Lock(); f.frozen.Store(true) }
func (f *freezable) thaw()   { f.frozen.Store(false); f.mu.Unlock() }

func (f *freezable) isReady() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ready.Load()
}

func (f *freezable) Votes(poll string, reqs []Request) []Answer {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.fullNode.Votes(poll, reqs)
}

func startFreezable(t *testing.T, conn func() *ServerConfig, name, region string) *freezable {
	t.Helper()
	f := &freezable{fullNode: &fullNode{name: name}}
	f.ready.Store(true)
	cfg := conn()
	cfg.Replica, cfg.Region, cfg.Handler, cfg.Ready, cfg.Every = name, region, f, f.isReady, 20*time.Millisecond
	s, err := StartServer(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if f.frozen.Load() {
			f.thaw()
		}
		s.Close()
	})
	return f
}

// logLines is a logger whose lines a test reads.
type logLines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *logLines) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// An edge relays only to the full nodes that say they are ready: one
// catching up (it would answer 503) gets no vote, through its own subject
// or the shared queue group, until it says it is; one that froze is left
// within the edge's Stale, a batch waiting on it going on to the next at
// once (not after its attempt's time); once it is back, the edge relays
// to it again. /v1/cluster's relays_to, tally_relay_target and the log
// say where the edge relays.
func TestEdgeRelaysOnlyToReadyFullNodes(t *testing.T) {
	conn := testnats.Start(t)
	seal, open := testseal.Sealer("k")
	server := func() *ServerConfig { return &ServerConfig{Conn: conn(), Cluster: "test", Seal: seal, Open: open} }
	a, b := startFreezable(t, server, "eu-a", "eu-west"), startFreezable(t, server, "us-b", "us-east")
	a.ready.Store(false) // catching up after a start
	logs := &logLines{}
	edge, m := startEdge(t, conn(), "k", func(c *EdgeConfig) {
		c.FullNodes = func() ([]string, []string) { return []string{"eu-a"}, []string{"us-b"} }
		c.Stale = 200 * time.Millisecond
		// Only rerouting gets a batch off a frozen node before the test's
		// own deadlines: an attempt's time never runs out here.
		c.Attempt, c.Deadline = time.Minute, 2*time.Minute
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	target := func(want ...string) {
		t.Helper()
		testwait.For(t, 10*time.Second, "the edge relaying to "+strings.Join(want, ", "), func() bool {
			got := edge.Targets()
			if len(got) != len(want) {
				return false
			}
			for i, g := range got {
				if g.Replica+"@"+g.Region != want[i] {
					return false
				}
			}
			return true
		})
	}
	// The replica that took a vote, from its answer's vote id.
	tookAt := func(e *Edge, i int) string {
		t.Helper()
		_, after, _ := strings.Cut(e.Relay(context.Background(), voteReq(i)).text(), `"vote_id":"`)
		replica, _, _ := strings.Cut(after, "/")
		return replica
	}
	vote := func(i int) string { t.Helper(); return tookAt(edge, i) }
	target("us-b@us-east")
	// An edge that knows no full node sends to the shared queue group,
	// which a node not ready is not in.
	shared, _ := startEdge(t, conn(), "k", nil)
	for i := range 10 {
		if got := vote(i); got != "us-b" {
			t.Fatalf("vote %d taken by %q while eu-a is not ready", i, got)
		}
		if got := tookAt(shared, 100+i); got != "us-b" {
			t.Fatalf("vote %d through the shared queue group taken by %q while eu-a is not ready", i, got)
		}
	}
	if a.votes.Load() != 0 {
		t.Fatalf("eu-a, not ready, took %d votes", a.votes.Load())
	}
	if testutil.ToFloat64(m.targets.WithLabelValues("us-b", "us-east")) != 1 {
		t.Fatal("tally_relay_target does not name us-b")
	}

	a.ready.Store(true) // caught up: its region's node comes first
	target("eu-a@eu-west")
	for i := 10; i < 20; i++ {
		if got := vote(i); got != "eu-a" {
			t.Fatalf("vote %d taken by %q with eu-a ready", i, got)
		}
	}
	if n := testutil.CollectAndCount(m.targets); n != 1 || testutil.ToFloat64(m.targets.WithLabelValues("eu-a", "eu-west")) != 1 {
		t.Fatalf("%d tally_relay_target series, want eu-a's alone", n)
	}

	// eu-a freezes with a vote in hand: the vote goes on to us-b.
	a.freeze()
	if got := vote(20); got != "us-b" {
		t.Fatalf("a vote while eu-a is frozen taken by %q", got)
	}
	target("us-b@us-east")
	if !strings.Contains(logs.String(), "relaying to us-b (region us-east), was eu-a (region eu-west)") || !strings.Contains(logs.String(), "eu-a silent for") {
		t.Fatalf("no log line for the failover:\n%s", logs)
	}
	a.thaw()
	target("eu-a@eu-west")
	if got := vote(21); got != "eu-a" {
		t.Fatalf("a vote once eu-a is back taken by %q", got)
	}
	if b.votes.Load() != 21 {
		t.Fatalf("us-b took %d votes, want 21", b.votes.Load())
	}
}
