package gossip

import (
	"bufio"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tally/crdt"
	"tally/hlc"
	"tally/poll"
	"tally/state"
)

// forgeries are the messages of issue 13's attacks, well formed, as a
// stranger builds them with Encode. Each would change the state if merged.
func forgeries(t *testing.T, target poll.Definition) map[string]*Message {
	now := time.Now()
	ts := hlc.Timestamp{Wall: now.UnixMilli(), Replica: "stranger"}
	msg := func(polls ...PollUpdate) *Message {
		return &Message{Kind: KindFull, Replica: "stranger", Region: "nowhere", Sent: ts, Polls: polls}
	}
	million := crdt.NewTally()
	million.Add(target.ID+"-replica", "a", 1_000_001)
	fakeReplica := crdt.NewTally()
	fakeReplica.AddRecords("ghost-1", 5)
	cert := state.Certificate{Poll: target.ID, Status: state.Reconciled, TS: ts, By: "stranger", Totals: map[string]uint64{"b": 999999}, Total: 999999, Digest: "deadbeef"}
	moved := target
	moved.Question, moved.ClosesAt = "Rewritten?", target.ClosesAt+7*24*3600*1000-1
	future := hlc.Timestamp{Wall: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), Replica: "stranger"}
	var flood []PollUpdate
	for i := range 20_000 {
		d := target
		d.ID = fmt.Sprintf("flood-%d", i)
		flood = append(flood, PollUpdate{ID: d.ID, Def: &crdt.Register[poll.Definition]{TS: ts, Value: d}})
	}
	empty := target
	empty.ID, empty.OpensAt, empty.ClosesAt = "forged-empty", now.Add(-time.Hour).UnixMilli(), now.Add(-time.Minute).UnixMilli()
	return map[string]*Message{
		"count 1,000,001":         msg(PollUpdate{ID: target.ID, Tally: million}),
		"forged certificate":      msg(PollUpdate{ID: target.ID, Cert: &cert}),
		"definition rewritten":    msg(PollUpdate{ID: target.ID, Def: &crdt.Register[poll.Definition]{TS: future, Value: moved}}),
		"fake replica, 5 records": msg(PollUpdate{ID: target.ID, Tally: fakeReplica}),
		"20,000 polls":            msg(flood...),
		"empty closed poll":       msg(PollUpdate{ID: empty.ID, Def: &crdt.Register[poll.Definition]{TS: ts, Value: empty}}),
	}
}

// TestStrangerCannotRewriteState: a stranger who reaches the NATS subject
// (here through the embedded server's client port) or a push/pull
// exchange sends each forgery, unsealed and sealed with a key of its own.
// Nothing changes — counts, certificate, definition, number of polls,
// replicas — and every message is counted as unauthenticated.
func TestStrangerCannotRewriteState(t *testing.T) {
	a := startMember(t, "a", "eu-west", nil, nil)
	target := testPoll("p")
	a.create(t, target)
	a.st.Count("p", "a", 1)
	a.st.AddRecords("p", 1)
	waitFor(t, 10*time.Second, "nats connected", a.Mesh().Connected)
	a.Mesh().flush(time.Second)
	before := snapshot(t, a)

	// The test reaches the subject with the node's own NATS credential, as
	// an insider could, to show that the seal alone holds.
	nc, err := nats.Connect(a.mesh.emb.srv.ClientURL(), nats.UserInfo(natsUser, natsPasswords(a.cfg.Keys)[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	strangerKey := newKeyring([][]byte{[]byte("a stranger's own key, 32 bytes!!")})
	sent := 0
	d := &delegate{g: a.Gossip}
	for name, m := range forgeries(t, target) {
		b, err := Encode(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, wire := range [][]byte{b, strangerKey.seal(b)} {
			if err := nc.Publish(a.subject, wire); err != nil {
				t.Fatal(err)
			}
			d.MergeRemoteState(wire, false)
			sent++
		}
	}
	nc.Flush()
	waitFor(t, 10*time.Second, "every forgery counted", func() bool {
		return counter(t, a, "dropped", pathNATS, "unauthenticated") == float64(sent) &&
			counter(t, a, "dropped", pathPushPull, "unauthenticated") == float64(sent)
	})
	if after := snapshot(t, a); after != before {
		t.Fatalf("the state changed:\nbefore %s\nafter  %s", before, after)
	}
}

// snapshot is everything a forgery could change, as text.
func snapshot(t *testing.T, m *member) string {
	t.Helper()
	tally, err := m.st.Tally("p")
	if err != nil {
		t.Fatal(err)
	}
	def, _ := m.st.Defs.Poll("p")
	cert, certified := m.st.Defs.Certificate("p")
	b, _ := json.Marshal(map[string]any{
		"totals": m.totals("p"), "records": maps.Clone(tally.RecordCounts()), "def": def,
		"cert": certified, "certBy": cert.By, "polls": len(m.st.Defs.Polls()),
	})
	return string(b)
}

// A node without a key is a single node (issue 25, item 1): a stranger's
// memberlist join and push/pull are refused before anything is merged, the
// node sends its own state to nobody, gossip binds to loopback, the
// embedded NATS client port refuses a connection without this process's
// password, and it opens no NATS route or gateway port. Every drop is
// counted as no_key.
func TestKeylessNodeTakesNoMembers(t *testing.T) {
	a := startMember(t, "a", "eu-west", nil, func(c *Config) { c.Keys, c.BindAddr = nil, ":0" })
	if a.self.NATSCluster != "" || a.self.NATSGateway != "" || a.self.NATSLeaf != "" {
		t.Fatalf("a keyless node opened route %q / gateway %q / leaf %q", a.self.NATSCluster, a.self.NATSGateway, a.self.NATSLeaf)
	}
	if h := splitHost(a.GossipAddr()); h != "127.0.0.1" {
		t.Fatalf("a keyless node binds gossip to %s, want loopback", a.GossipAddr())
	}
	target := testPoll("p")
	a.create(t, target)
	a.st.Count("p", "a", 1)
	a.st.AddRecords("p", 1)
	before := snapshot(t, a)

	// A stranger running a cluster without a key, holding a forged state
	// of the same poll and one of its own, joins and push/pulls.
	stranger := startMember(t, "stranger", "nowhere", nil, func(c *Config) { c.Keys, c.AllowInsecure = nil, true })
	stranger.create(t, target)
	stranger.st.Count("p", "b", 999_999)
	other := testPoll("stranger-poll")
	stranger.create(t, other)
	stranger.ml.Join([]string{a.GossipAddr()})
	waitFor(t, 10*time.Second, "the join refused and counted", func() bool {
		return counter(t, a, "dropped", pathPushPull, "no_key") >= 1
	})
	if n := len(a.Members()); n != 1 {
		t.Fatalf("the keyless node has %d members", n)
	}
	// Forged messages handed straight to the push/pull delegate, as a
	// stranger's crafted exchange would deliver them.
	d := &delegate{g: a.Gossip}
	for name, m := range forgeries(t, target) {
		b, err := Encode(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		d.MergeRemoteState(b, false)
	}
	if after := snapshot(t, a); after != before {
		t.Fatalf("a stranger changed a keyless node's state:\nbefore %s\nafter  %s", before, after)
	}
	if _, ok := stranger.st.Defs.Poll("p"); ok && stranger.totals("p")["a"] != 0 {
		t.Fatalf("the keyless node sent its counts to a stranger: %v", stranger.totals("p"))
	}
	if b := d.LocalState(false); b != nil {
		t.Fatalf("a keyless node's push/pull state is %d bytes, want none", len(b))
	}
	if got := counter(t, a, "merges", pathPushPull); got != 0 {
		t.Fatalf("merges_total{pushpull} = %v at a keyless node", got)
	}

	// NATS: no credential, a guessed one, and the subject's forgery.
	for _, opts := range [][]nats.Option{nil, {nats.UserInfo(natsUser, "guess")}, {nats.UserInfo(natsUser, "")}} {
		if nc, err := nats.Connect(a.mesh.emb.srv.ClientURL(), opts...); err == nil {
			nc.Close()
			t.Fatalf("a keyless node's NATS took a connection with %d options", len(opts))
		}
	}
	if !a.Mesh().Connected() {
		waitFor(t, 10*time.Second, "the node's own NATS connection", a.Mesh().Connected)
	}
	if _, err := New(Config{NodeName: "b", Replica: "b-r", Region: "r", Join: []string{a.GossipAddr()}, State: a.st, Clock: a.clock}); err == nil {
		t.Fatal("--join without a key was accepted")
	}
	g, err := New(Config{NodeName: "c", Replica: "c-r", Region: "r", BindAddr: "192.0.2.1:0", State: a.st, Clock: a.clock, NATSAddr: "127.0.0.1:0", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); !errors.Is(err, ErrConfig) {
		g.Close()
		t.Fatalf("a keyless node asked to bind gossip beyond loopback: %v, want ErrConfig", err)
	}
}

// Even a member (its messages sealed with the cluster key) cannot stamp a
// definition or certificate far in the future, invent replicas past the
// bound, or add counts for options the poll does not have.
func TestMemberMessagesAreBounded(t *testing.T) {
	a := startMember(t, "a", "eu-west", nil, nil)
	target := testPoll("p")
	a.create(t, target)
	a.st.Count("p", "a", 1)
	before := snapshot(t, a)
	now := time.Now()
	ts := hlc.Timestamp{Wall: now.UnixMilli(), Replica: "member"}
	future := hlc.Timestamp{Wall: now.Add(time.Hour).UnixMilli(), Replica: "member"}
	moved := target
	moved.Question = "Rewritten?"
	cert := state.Certificate{Poll: "p", Status: state.Reconciled, TS: future, By: "member", Totals: map[string]uint64{"a": 9}, Total: 9, Digest: "x"}
	swarm := crdt.NewTally()
	for i := range state.MaxReplicas + 44 {
		swarm.AddRecords(fmt.Sprintf("ghost-%d", i), 1)
	}
	ghostOption := crdt.NewTally()
	ghostOption.Add("member-r", "not-an-option", 50_000)
	d := &delegate{g: a.Gossip}
	for i, m := range []*Message{
		{Kind: KindFull, Replica: "member", Region: "r", Sent: ts, Polls: []PollUpdate{{ID: "p", Def: &crdt.Register[poll.Definition]{TS: future, Value: moved}}}},
		{Kind: KindFull, Replica: "member", Region: "r", Sent: ts, Polls: []PollUpdate{{ID: "p", Cert: &cert}}},
		{Kind: KindFull, Replica: "member", Region: "r", Sent: ts, Polls: []PollUpdate{{ID: "p", Tally: swarm}}},
		{Kind: KindFull, Replica: "member", Region: "r", Sent: ts, Polls: []PollUpdate{{ID: "p", Tally: ghostOption}}},
	} {
		m.Sent.Logical = uint32(i) // each message sent after the last, as a member's are
		b, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		d.MergeRemoteState(a.keys.seal(b), false)
	}
	if got := counter(t, a, "dropped", pathPushPull, "future_stamp"); got != 2 {
		t.Fatalf("future stamps dropped: %v", got)
	}
	if got := counter(t, a, "dropped", pathPushPull, "too_many_replicas"); got != 1 {
		t.Fatalf("replica swarm dropped: %v", got)
	}
	if got := counter(t, a, "dropped", pathPushPull, "unknown_option"); got != 1 {
		t.Fatalf("unknown options dropped: %v", got)
	}
	if after := snapshot(t, a); after != before {
		t.Fatalf("the state changed:\nbefore %s\nafter  %s", before, after)
	}
	tally, _ := a.st.Tally("p")
	if opts := tally.Options(); len(opts) > len(target.Options) {
		t.Fatalf("options held: %v", opts)
	}
}

// A stranger without the cluster key cannot reach the embedded NATS
// server: its client port, and its route and gateway ports (spoken to in
// the NATS protocol as a stranger's server would), refuse every
// credential but the one derived from the key.
func TestStrangerCannotConnectToNATS(t *testing.T) {
	a := startMember(t, "a", "eu-west", nil, nil)
	for name, opts := range map[string][]nats.Option{
		"no credential":          nil,
		"a guessed password":     {nats.UserInfo(natsUser, "guess")},
		"the key as a password":  {nats.UserInfo(natsUser, string(testKey))},
		"another key's password": {nats.UserInfo(natsUser, natsPasswords([][]byte{[]byte("another key of thirty-two bytes!")})[0])},
	} {
		nc, err := nats.Connect(a.mesh.emb.srv.ClientURL(), append(opts, nats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
			t.Errorf("client port, %s: connected", name)
		}
	}
	for port, connect := range map[string]string{
		a.self.NATSCluster: `{"verbose":false,"pedantic":false,"user":"tally","pass":"guess","tls_required":false,"name":"stranger","cluster":"eu-west"}`,
		a.self.NATSGateway: `{"verbose":false,"pedantic":false,"user":"tally","pass":"guess","tls_required":false,"name":"stranger","gateway":"nowhere"}`,
		a.self.NATSLeaf:    `{"verbose":false,"pedantic":false,"user":"tally","pass":"guess","tls_required":false,"name":"stranger"}`,
	} {
		if port == "" {
			t.Fatal("a opened no route, gateway or leaf port")
		}
		conn, err := net.DialTimeout("tcp", port, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(conn)
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
			t.Fatalf("%s: %q %v", port, line, err)
		}
		fmt.Fprintf(conn, "CONNECT %s\r\nPING\r\n", connect)
		line, _ := r.ReadString('\n')
		if !strings.Contains(line, "Authorization Violation") {
			t.Errorf("%s took a stranger's CONNECT: %q", port, line)
		}
		conn.Close()
	}
	if routes, gateways := a.Mesh().Links(); routes != 0 || len(gateways) != 0 {
		t.Fatalf("links after the stranger: %d routes, gateways %v", routes, gateways)
	}
	if a.Mesh().LeafNodes() != 0 {
		t.Fatalf("a took the stranger as a leaf node")
	}
	want := map[string]float64{"client": 4, "route": 1, "gateway": 1, "leaf": 1}
	waitFor(t, 5*time.Second, "every refusal counted", func() bool {
		for port, n := range want {
			if testutil.ToFloat64(a.m.refused.WithLabelValues(port, "auth")) < n {
				return false
			}
		}
		return true
	})
}

// Certificates are signed by the replica that certified: a member relaying
// one unsigned, re-signed with another key, tampered with, or from a
// replica nobody knows the key of, gets it dropped (bad_signature); a
// certificate signed with the announced key is taken.
func TestCertificatesMustBeSignedByTheirCertifier(t *testing.T) {
	a := startMember(t, "a", "eu-west", nil, nil)
	a.create(t, testPoll("p"))
	pub, priv, _ := ed25519.GenerateKey(nil)
	_, stranger, _ := ed25519.GenerateKey(nil)
	if err := a.st.Defs.LearnKey("us-1", pub); err != nil { // as if announced in us-1's member metadata
		t.Fatal(err)
	}
	ts := hlc.Timestamp{Wall: time.Now().UnixMilli(), Replica: "us-1"}
	good := state.Certificate{Poll: "p", Status: state.Reconciled, TS: ts, By: "us-1", Totals: map[string]uint64{"a": 2}, Total: 2, Digest: "d1"}
	good.Sig = ed25519.Sign(priv, good.SigningBytes())
	unsigned := good
	unsigned.Sig = nil
	resigned := good
	resigned.Sig = ed25519.Sign(stranger, resigned.SigningBytes())
	tampered := good
	tampered.Totals, tampered.Total = map[string]uint64{"b": 999999}, 999999
	unknown := good
	unknown.By = "ghost-1"
	unknown.Sig = ed25519.Sign(stranger, unknown.SigningBytes())
	d := &delegate{g: a.Gossip}
	sent := ts
	send := func(c state.Certificate) {
		sent.Logical++ // each message sent after the last, as a member's are
		b, err := Encode(&Message{Kind: KindFull, Replica: "member", Region: "r", Sent: sent, Polls: []PollUpdate{{ID: "p", Cert: &c}}})
		if err != nil {
			t.Fatal(err)
		}
		d.MergeRemoteState(a.keys.seal(b), false)
	}
	for _, c := range []state.Certificate{unsigned, resigned, tampered, unknown} {
		send(c)
	}
	if got := counter(t, a, "dropped", pathPushPull, "bad_signature"); got != 4 {
		t.Fatalf("bad signatures dropped: %v", got)
	}
	if _, ok := a.st.Defs.Certificate("p"); ok {
		t.Fatal("a badly signed certificate was taken")
	}
	send(good)
	if c, ok := a.st.Defs.Certificate("p"); !ok || c.Total != 2 {
		t.Fatalf("the signed certificate: %+v %v", c, ok)
	}
}

// The route and gateway listeners bind where gossip binds when their
// addresses name no host (not on every interface).
func TestNATSListenersBindWhereGossipBinds(t *testing.T) {
	a := startMember(t, "a", "eu-west", nil, func(c *Config) { c.NATSClusterAddr, c.NATSGatewayAddr = ":0", ":0" })
	for name, host := range map[string]string{"route": a.mesh.emb.srv.ClusterAddr().IP.String(), "gateway": a.mesh.emb.srv.GatewayAddr().IP.String()} {
		if host != "127.0.0.1" {
			t.Errorf("%s listener on %s, gossip on 127.0.0.1", name, host)
		}
	}
}

// Mid-rotation, two regions whose primary keys differ still link over
// NATS: each server takes its primary's password, and each dials its peers
// with one credential per key of its ring.
func TestNATSLinksMidRotation(t *testing.T) {
	oldKey, newKey := testKey, []byte("a new cluster key of 32 bytes!!!")
	a := startMember(t, "a", "eu-west", nil, func(c *Config) { c.Keys = [][]byte{oldKey, newKey} })
	b := startMember(t, "b", "us-east", []string{a.GossipAddr()}, func(c *Config) { c.Keys = [][]byte{newKey, oldKey} })
	waitFor(t, 20*time.Second, "gateways both ways", func() bool {
		_, ga := a.Mesh().Links()
		_, gb := b.Mesh().Links()
		return slices.Contains(ga, "us-east") && slices.Contains(gb, "eu-west")
	})
}

// A genuine message captured on the wire and replayed later changes
// nothing: counters merge by max and definitions by their stamp, so an
// old state cannot roll back a newer one (an admin's close, later votes).
// Tampering with a captured message breaks its seal.
func TestReplayedGossipChangesNothing(t *testing.T) {
	a := startMember(t, "a", "eu-west", nil, nil)
	b := startMember(t, "b", "us-east", []string{a.GossipAddr()}, nil)
	target := testPoll("p")
	b.create(t, target)
	waitFor(t, 10*time.Second, "the poll at a", func() bool { return a.totals("p") != nil })
	b.st.Count("p", "a", 1)
	captured := (&delegate{g: b.Gossip}).LocalState(false) // sealed, as on the wire

	b.st.Count("p", "a", 2)
	closed := target
	closed.ClosesAt = time.Now().UnixMilli()
	b.create(t, closed) // the admin closes early: a newer stamp
	waitFor(t, 10*time.Second, "a has the newer state", func() bool {
		def, _ := a.st.Defs.Poll("p")
		return a.totals("p")["a"] == 3 && def.ClosesAt == closed.ClosesAt
	})
	before := snapshot(t, a)
	d := &delegate{g: a.Gossip}
	d.MergeRemoteState(captured, false)
	tampered := append([]byte{}, captured...)
	tampered[len(tampered)-1] ^= 1
	dropped := counter(t, a, "dropped", pathPushPull, "unauthenticated")
	d.MergeRemoteState(tampered, false)
	if after := snapshot(t, a); after != before {
		t.Fatalf("a replay changed the state:\nbefore %s\nafter  %s", before, after)
	}
	if got := counter(t, a, "dropped", pathPushPull, "unauthenticated"); got != dropped+1 {
		t.Fatalf("the tampered replay was not dropped as unauthenticated (%v → %v)", dropped, got)
	}
}

// TestReplayRevivesNoRegion: a sealed message captured and sent again
// neither makes its replica look fresh nor brings its viewers back
// (issue 25, item 4): freshness and viewer reports take the sender's time,
// a message no newer than the last from its replica on that path is
// dropped, and so is one older than maxMessageAge; each counted as replay.
func TestReplayRevivesNoRegion(t *testing.T) {
	a := startMember(t, "a", "eu-west", nil, nil)
	a.create(t, testPoll("p"))
	d := &delegate{g: a.Gossip}
	now := time.Now()
	msg := func(sent time.Time, viewers int64) []byte {
		b, err := Encode(&Message{Kind: KindFull, Replica: "ap-1", Region: "ap-south", Sent: hlc.Timestamp{Wall: sent.UnixMilli(), Replica: "ap-1"},
			Polls: []PollUpdate{{ID: "p", Viewers: &viewers}}})
		if err != nil {
			t.Fatal(err)
		}
		return a.keys.seal(b)
	}
	own := func() int64 { n, _ := a.st.Audience.Own("p"); return n }
	// Captured 12 s ago with 30 viewers: the replica's last words before
	// it died. Then the capture is sent again now.
	captured := msg(now.Add(-12*time.Second), 30)
	d.MergeRemoteState(captured, false)
	d.MergeRemoteState(captured, false)
	if got := counter(t, a, "dropped", pathPushPull, "replay"); got != 1 {
		t.Fatalf("replays dropped: %v, want 1", got)
	}
	if at, _ := a.st.Replicas.HeardAt("ap-1"); at != now.Add(-12*time.Second).UnixMilli() {
		t.Fatalf("ap-1 heard at %d, want its send time %d", at, now.Add(-12*time.Second).UnixMilli())
	}
	if n := a.st.Audience.Count("p", now.UnixMilli()) - own(); n != 0 {
		t.Fatalf("a 12 s old report counts %d viewers", n)
	}
	// An older capture arriving after a newer message is a replay; one
	// older than maxMessageAge is dropped whatever came before.
	d.MergeRemoteState(msg(now.Add(-time.Second), 5), false)
	d.MergeRemoteState(msg(now.Add(-2*time.Second), 40), false)
	if n := a.st.Audience.Count("p", now.UnixMilli()) - own(); n != 5 {
		t.Fatalf("viewers after a newer report and an older replay: %d, want 5", n)
	}
	a.receive(pathNATS, msg(now.Add(-31*time.Second), 99))
	if got := counter(t, a, "dropped", pathNATS, "replay"); got != 1 {
		t.Fatalf("a message 31 s old: replays dropped %v", got)
	}
	if got := counter(t, a, "dropped", pathPushPull, "replay"); got != 2 {
		t.Fatalf("push/pull replays dropped: %v, want 2", got)
	}
}
