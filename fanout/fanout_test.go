package fanout

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"tally/hlc"
	"tally/internal/testwait"
	"tally/poll"
	"tally/state"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSender records what a viewer was sent; it can be made to block.
type fakeSender struct {
	mu      sync.Mutex
	frames  [][]byte
	block   chan struct{} // when set, send waits for it (or ctx)
	entered chan struct{} // when set, send signals it on entry
	closed  bool
	gone    chan struct{} // closed by close: a blocked send returns, as on a real socket
	once    sync.Once
}

func (f *fakeSender) send(ctx context.Context, b []byte) error {
	f.mu.Lock()
	block, entered := f.block, f.entered
	f.mu.Unlock()
	if entered != nil {
		select {
		case entered <- struct{}{}:
		default:
		}
	}
	if block != nil {
		select {
		case <-block:
		case <-f.goneCh():
			return errors.New("connection closed")
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frames = append(f.frames, b)
	return nil
}

func (f *fakeSender) close(string) {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	close(f.goneCh())
}

func (f *fakeSender) goneCh() chan struct{} {
	f.once.Do(func() { f.gone = make(chan struct{}) })
	return f.gone
}

func (f *fakeSender) got() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.frames...)
}

func newState(t testing.TB) *state.State {
	t.Helper()
	st, err := state.New(state.Config{Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	def := poll.Definition{ID: "p", Question: "Q?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: time.Now().Add(-time.Minute).UnixMilli(), ClosesAt: time.Now().Add(time.Hour).UnixMilli(), GraceMs: 1000}
	if _, err := st.Defs.PutPoll(def, hlc.Timestamp{Wall: 1, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	return st
}

// newServer returns a server whose hubs never tick on their own: tests
// call tick themselves.
func newServer(t testing.TB, st *state.State, mutate func(*Config)) *Server {
	t.Helper()
	cfg := Config{Source: st, Tick: time.Hour, Heartbeat: time.Hour}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// waitUntil polls cond until it holds or 5 s pass (testwait.For).
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	testwait.For(t, 5*time.Second, "the condition", cond)
}

func TestOneEncodingPerTickSharedByEveryViewer(t *testing.T) {
	st := newState(t)
	s := newServer(t, st, nil)
	var senders []*fakeSender
	var v0 *viewer
	for i := range 50 {
		fs := &fakeSender{}
		senders = append(senders, fs)
		v, err := s.join("p", "ip", "test", fs)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			v0 = v
		}
	}
	for _, fs := range senders {
		waitUntil(t, func() bool { return len(fs.got()) == 1 }) // the snapshot
	}
	st.Count("p", "a", 1)
	v0.hub.tick()
	for _, fs := range senders {
		waitUntil(t, func() bool { return len(fs.got()) == 2 })
	}
	first := senders[0].got()[1]
	for _, fs := range senders[1:] {
		if b := fs.got()[1]; &b[0] != &first[0] {
			t.Fatal("viewers got different encodings of one frame")
		}
	}
	if !contains(first, `"type":"diff"`) || !contains(first, `"totals":{"a":1}`) {
		t.Fatalf("diff frame: %s", first)
	}
	// Nothing changed: nothing is sent.
	v0.hub.tick()
	v0.hub.tick()
	time.Sleep(20 * time.Millisecond) // give a wrong implementation the chance to send
	for _, fs := range senders {
		if n := len(fs.got()); n != 2 {
			t.Fatalf("a viewer got %d frames after ticks without change", n)
		}
	}
}

func TestSlowViewerGetsLatestFrameThenIsDropped(t *testing.T) {
	st := newState(t)
	s := newServer(t, st, func(c *Config) { c.WriteTimeout = time.Second })
	slow := &fakeSender{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	v, err := s.join("p", "ip", "test", slow)
	if err != nil {
		t.Fatal(err)
	}
	h := v.hub
	<-slow.entered // the first snapshot's write is stuck
	// The snapshot write is stuck; three changes pile up behind it.
	for range 3 {
		st.Count("p", "b", 1)
		h.tick()
	}
	close(slow.block) // the viewer catches up
	waitUntil(t, func() bool { return len(slow.got()) == 2 })
	frames := slow.got()
	if !contains(frames[1], `"type":"snapshot"`) || !contains(frames[1], `"b":3`) || !contains(frames[1], `"seq":4`) {
		t.Fatalf("after catching up: %s", frames[1])
	}
	// Now it blocks for good and is dropped after the write timeout.
	slow.mu.Lock()
	slow.block = make(chan struct{})
	slow.mu.Unlock()
	st.Count("p", "a", 1)
	h.tick()
	waitUntil(t, func() bool { return s.Viewers() == 0 })
	slow.mu.Lock()
	defer slow.mu.Unlock()
	if !slow.closed {
		t.Fatal("slow viewer not closed")
	}
}

func TestGapRecoveryAndHubLifecycle(t *testing.T) {
	st := newState(t)
	s := newServer(t, st, nil)
	fs := &fakeSender{}
	v, _ := s.join("p", "ip", "test", fs)
	waitUntil(t, func() bool { return len(fs.got()) == 1 })
	v.hub.resync(v)
	waitUntil(t, func() bool { return len(fs.got()) == 2 })
	if !contains(fs.got()[1], `"type":"snapshot"`) {
		t.Fatalf("resync sent %s", fs.got()[1])
	}
	// The last viewer leaving stops the hub; a new viewer starts a new one.
	h := v.hub
	h.remove(v, "bye")
	s.mu.Lock()
	_, alive := s.hubs["p"]
	s.mu.Unlock()
	if alive {
		t.Fatal("hub outlived its last viewer")
	}
	if _, err := s.join("nope", "ip", "test", &fakeSender{}); err == nil {
		t.Fatal("joined an unknown poll")
	}
}

func TestLimits(t *testing.T) {
	st := newState(t)
	s := newServer(t, st, func(c *Config) { c.MaxViewers, c.MaxViewersPerIP = 3, 2 })
	for range 2 {
		if _, err := s.join("p", "1.1.1.1", "test", &fakeSender{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.join("p", "1.1.1.1", "test", &fakeSender{}); err == nil {
		t.Fatal("per-IP limit not enforced")
	}
	if _, err := s.join("p", "2.2.2.2", "test", &fakeSender{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.join("p", "3.3.3.3", "test", &fakeSender{}); err == nil {
		t.Fatal("total limit not enforced")
	}
}

func TestEventsAndHeartbeat(t *testing.T) {
	prev := view{totals: map[string]int64{"a": 9, "b": 8}, total: 17}
	cur := view{totals: map[string]int64{"a": 9, "b": 10}, total: 19}
	// b passes a and takes the lead; 17 → 19 crosses no milestone.
	evs := events(prev, cur)
	if len(evs) != 2 || evs[0] != (Event{Kind: "leader", Option: "b"}) || evs[1] != (Event{Kind: "overtake", Option: "b", Passed: "a"}) {
		t.Fatalf("events %+v", evs)
	}
	if m := events(view{total: 99}, view{total: 100, totals: map[string]int64{}}); len(m) != 1 || m[0].Total != 100 {
		t.Fatalf("milestone events %+v", m)
	}

	st := newState(t)
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := newServer(t, st, func(c *Config) { c.Heartbeat = time.Second; c.Now = clock })
	fs := &fakeSender{}
	v, _ := s.join("p", "ip", "test", fs)
	waitUntil(t, func() bool { return len(fs.got()) == 1 })
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	v.hub.tick()
	waitUntil(t, func() bool { return len(fs.got()) == 2 })
	if !contains(fs.got()[1], `"type":"heartbeat"`) {
		t.Fatalf("heartbeat: %s", fs.got()[1])
	}
}

func contains(b []byte, s string) bool { return bytes.Contains(b, []byte(s)) }

// TestFreshnessVector: with Freshness set, snapshots and heartbeats carry
// the per-region vector read at that tick; without it, frames have none.
func TestFreshnessVector(t *testing.T) {
	st := newState(t)
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	age := int64(120)
	s := newServer(t, st, func(c *Config) {
		c.Heartbeat, c.Now = time.Second, clock
		c.Freshness = func() map[string]int64 {
			mu.Lock()
			defer mu.Unlock()
			return map[string]int64{"eu-west": 0, "us-east": age}
		}
	})
	fs := &fakeSender{}
	v, _ := s.join("p", "ip", "test", fs)
	waitUntil(t, func() bool { return len(fs.got()) == 1 })
	if !contains(fs.got()[0], `"regions":{"eu-west":0,"us-east":120}`) {
		t.Fatalf("snapshot: %s", fs.got()[0])
	}
	mu.Lock()
	now, age = now.Add(2*time.Second), 900
	mu.Unlock()
	v.hub.tick()
	waitUntil(t, func() bool { return len(fs.got()) == 2 })
	if b := fs.got()[1]; !contains(b, `"type":"heartbeat"`) || !contains(b, `"us-east":900`) {
		t.Fatalf("heartbeat: %s", b)
	}

	bare := newServer(t, newState(t), nil)
	fs2 := &fakeSender{}
	bare.join("p", "ip", "test", fs2)
	waitUntil(t, func() bool { return len(fs2.got()) == 1 })
	if contains(fs2.got()[0], `"regions"`) {
		t.Fatalf("frame without Freshness: %s", fs2.got()[0])
	}
}
