package gossip

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tally/hlc"
	"tally/state"
)

// keyLog is a log a test reads while a logger writes it.
type keyLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *keyLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *keyLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// errNoKey is memberlist v0.7.0's error for a message no installed key
// decrypts (security.go, decryptPayload).
var errNoKey = errors.New("no installed keys could decrypt the message")

// memberlistLines are memberlist v0.7.0's log lines that report another
// key, each formatted as its source does (the address part by its own
// LogAddress, which LogConn calls with the connection's remote address),
// with the refusal each must be read as.
var memberlistLines = []struct {
	path string
	line string
	want keyRefusal
}{{
	"a UDP packet (net.go, ingestPacket)",
	fmt.Sprintf("[ERR] memberlist: Decrypt packet failed: %v %s", errNoKey, memberlist.LogAddress(&net.UDPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 7946})),
	keyRefusal{peer: "10.0.0.7:7946", dir: "received"},
}, {
	"a stream: a join or push/pull sent to this node (net.go, handleConn)",
	fmt.Sprintf("[ERR] memberlist: failed to receive: %s %s", errNoKey, memberlist.LogAddress(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 53122})),
	keyRefusal{peer: "10.0.0.7:53122", dir: "received"},
}, {
	"a stream of no known address (logging.go, LogAddress(nil))",
	fmt.Sprintf("[ERR] memberlist: failed to receive: %s %s", errNoKey, memberlist.LogAddress(nil)),
	keyRefusal{peer: unnamedPeer, dir: "received"},
}, {
	"this node's join, whose seed's answer it cannot read (memberlist.go, Join)",
	fmt.Sprintf("[DEBUG] memberlist: %v", fmt.Errorf("failed to join %s: %v", "10.0.0.7:7946", errNoKey)),
	keyRefusal{peer: "10.0.0.7:7946", dir: "sent", join: true},
}, {
	"this node's join, refused by a seed that reads its answer (net.go, sendAndReceiveState's remote error)",
	fmt.Sprintf("[DEBUG] memberlist: %v", fmt.Errorf("failed to join %s: %v", "[fd00::7]:7946", fmt.Errorf("remote error: %v", errNoKey))),
	keyRefusal{peer: "[fd00::7]:7946", dir: "sent", join: true},
}, {
	"this node's push/pull with a member (state.go, pushPull)",
	fmt.Sprintf("[ERR] memberlist: Push/Pull with %s failed: %s", "node-7", errNoKey),
	keyRefusal{peer: "node-7", dir: "sent"},
}, {
	"this node's fallback TCP ping (state.go, probeNode)",
	fmt.Sprintf("[ERR] memberlist: Failed fallback TCP ping: %s%s", "", errNoKey),
	keyRefusal{peer: unnamedPeer, dir: "sent"},
}}

// TestRefusalOfNamesThePeer: every memberlist line of a key mismatch is
// read as one, naming the peer as far as the line does, in the direction
// it went; other lines are not.
func TestRefusalOfNamesThePeer(t *testing.T) {
	for _, tc := range memberlistLines {
		got, ok := refusalOf(tc.line)
		if !ok || got != tc.want {
			t.Errorf("%s: refusalOf(%q) = %+v, %v; want %+v", tc.path, tc.line, got, ok, tc.want)
		}
	}
	for _, line := range []string{
		fmt.Sprintf("[DEBUG] memberlist: Stream connection %s", memberlist.LogAddress(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 53122})),
		fmt.Sprintf("[DEBUG] memberlist: %v", fmt.Errorf("failed to join %s: %v", "10.0.0.7:7946", "dial tcp 10.0.0.7:7946: connect: connection refused")),
	} {
		if got, ok := refusalOf(line); ok {
			t.Errorf("refusalOf(%q) = %+v: not a key mismatch", line, got)
		}
	}
}

// watchedGossip is a Gossip with just what a keyWatch uses: a log, the
// metrics, and one member, node-7 at 10.0.0.7:7946.
func watchedGossip(t *testing.T, log *keyLog) *Gossip {
	t.Helper()
	g := &Gossip{log: slog.New(slog.NewTextHandler(log, nil)), members: map[string]peer{"node-7": {name: "node-7", gossip: "10.0.0.7:7946"}}}
	var err error
	if g.m, err = newMetrics(prometheus.NewRegistry(), g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestKeyWatchLogsThePeer: for each memberlist line of another key, the
// node logs one error naming --gossip-key and the peer (a member's address
// for its push/pull), never an empty one, and counts it in its direction.
func TestKeyWatchLogsThePeer(t *testing.T) {
	msgs := map[string]string{"received": keyReceivedMsg, "sent": keySentMsg, "join": keyJoinMsg}
	for _, tc := range memberlistLines {
		log := &keyLog{}
		g := watchedGossip(t, log)
		w := newKeyWatch(g)
		fmt.Fprintln(w, tc.line) // as log.Logger writes: one line, newline ended
		peer, kind := tc.want.peer, tc.want.dir
		if peer == "node-7" {
			peer = "10.0.0.7:7946"
		}
		if tc.want.join {
			kind = "join"
		}
		if strings.ContainsAny(peer, ` "=`) {
			peer = fmt.Sprintf("%q", peer) // slog's text quotes it
		}
		want := fmt.Sprintf("level=ERROR msg=%q peer=%s flag=--gossip-key suppressed=0", msgs[kind], peer)
		if !strings.Contains(log.String(), want) {
			t.Errorf("%s: logged\n%s\nwant a line with\n%s", tc.path, log.String(), want)
		}
		if strings.Contains(log.String(), `peer=""`) {
			t.Errorf("%s: logged an empty peer:\n%s", tc.path, log.String())
		}
		if v := testutil.ToFloat64(g.m.keyMismatch.WithLabelValues(tc.want.dir)); v != 1 {
			t.Errorf("%s: tally_gossip_key_mismatch_total{direction=%q} = %v, want 1", tc.path, tc.want.dir, v)
		}
		if got := w.refused(); got != (tc.want.dir == "sent") {
			t.Errorf("%s: refused = %v", tc.path, got)
		}
		if !w.seen() {
			t.Errorf("%s: not seen", tc.path)
		}
	}
}

// TestKeyWatchRepeatsAtMostEvery30s: the second failure within
// keyMismatchLogEvery is counted, not logged; the next line says how many
// were left out.
func TestKeyWatchRepeatsAtMostEvery30s(t *testing.T) {
	log := &keyLog{}
	g := watchedGossip(t, log)
	w := newKeyWatch(g)
	line := memberlistLines[3].line // a join
	fmt.Fprintln(w, line)
	fmt.Fprintln(w, line)
	if n := strings.Count(log.String(), "level=ERROR"); n != 1 {
		t.Errorf("%d error lines, want 1:\n%s", n, log.String())
	}
	w.mu.Lock()
	w.lastLog = w.lastLog.Add(-keyMismatchLogEvery)
	w.mu.Unlock()
	fmt.Fprintln(w, line)
	if !strings.Contains(log.String(), "suppressed=1") {
		t.Errorf("the next line does not count the one left out:\n%s", log.String())
	}
	if v := testutil.ToFloat64(g.m.keyMismatch.WithLabelValues("sent")); v != 3 {
		t.Errorf("tally_gossip_key_mismatch_total{direction=\"sent\"} = %v, want 3", v)
	}
}

// TestJoinWithAnotherKeyNamesTheSeed: a node whose --gossip-key the seed
// does not hold logs, through real memberlist, the seed's error naming the
// seed's address; its join error is a key refusal (no "cannot join the
// seeds yet" warning), KeyRefused says so, and it is a member of nothing.
func TestJoinWithAnotherKeyNamesTheSeed(t *testing.T) {
	a := startMember(t, "a", "eu-west", nil, nil)
	log := &keyLog{}
	st, err := state.New(state.Config{Replica: "x-r"})
	if err != nil {
		t.Fatal(err)
	}
	clock, err := hlc.New(hlc.Config{Replica: "x-r"})
	if err != nil {
		t.Fatal(err)
	}
	x, err := New(Config{NodeName: "x", Region: "us-east", Replica: "x-r", BindAddr: "127.0.0.1:0", Profile: "local",
		NATSAddr: "127.0.0.1:0", Join: []string{a.GossipAddr()}, Keys: [][]byte{[]byte("fedcba9876543210fedcba9876543210")},
		State: st, Clock: clock, Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	want := fmt.Sprintf("level=ERROR msg=%q component=gossip peer=%s flag=--gossip-key", keyJoinMsg, a.GossipAddr())
	waitFor(t, 10*time.Second, "the joiner's error naming the seed", func() bool { return strings.Contains(log.String(), want) })
	if s := log.String(); strings.Contains(s, `peer=""`) || strings.Contains(s, keyReceivedMsg) || strings.Contains(s, "cannot join the seeds yet") {
		t.Errorf("the joiner logged an empty peer, the seed's error or a plain join failure:\n%s", s)
	}
	if !KeyRefused(x) || KeyRefused(a.Gossip) {
		t.Errorf("KeyRefused: joiner %v, seed %v; want true, false", KeyRefused(x), KeyRefused(a.Gossip))
	}
	if x.Joined() || len(x.Members()) != 1 {
		t.Errorf("the joiner joined (%v) or lists %d members", x.Joined(), len(x.Members()))
	}
}
