package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"

	"tally/api"
	"tally/internal/testwait"
	"tally/relay"
)

// freePort returns a loopback address nothing listens on now, TCP or UDP
// (memberlist takes both), for a node that must keep its port across
// restarts. It is drawn below the kernel's ephemeral range (32768 and up
// on Linux), where every ":0" listener of the suite's processes lands, so
// none of those can take it between this call and the node's start; and
// never twice in one test binary.
func freePort(t *testing.T) string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if portsGiven[port] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		portsGiven[port] = true
		return addr
	}
	t.Fatal("no free port in 20000-31999")
	return ""
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// edgeTier is a region of two full nodes and two edges, all processes,
// beside a full node of another region in the test process.
type edgeTier struct {
	us          *testNode
	full, edges []*procNode
	fullDirs    []string
	fullFlags   [][]string
	edgeGossip  []string // the edges' gossip addresses: a seed once the other region is gone
	bin         string
}

func startEdgeTier(t *testing.T) *edgeTier { t.Helper(); return startEdgeTierCopies(t, 1) }

// startEdgeTierCopies is startEdgeTier with every full node on
// --ack-copies copies.
func startEdgeTierCopies(t *testing.T, copies int) *edgeTier {
	t.Helper()
	et := &edgeTier{bin: buildNodeBinary(t)}
	// The trust floor of the processes (--trust-floor 0): a certificate
	// made by us-east must apply the same floor as one made by them.
	et.us = startNode(t, t.TempDir(), func(c *Config) { c.Region, c.Now, c.AckCopies, c.TrustFloor = "us-east", time.Now, copies, 0 })
	common := func(name, gossipAddr string) []string {
		return []string{"--region", "eu-west", "--node-name", name, "--join", et.us.GossipAddr(), "--gossip-addr", gossipAddr,
			"--gossip-profile", "local", "--push-pull-interval", "500ms", "--nats-cluster-addr", "127.0.0.1:0"}
	}
	for i := range 2 {
		flags := append(common(fmt.Sprintf("eu-full-%d", i), freePort(t)), "--nats-gateway-addr", "127.0.0.1:0", "--nats-leaf-addr", "127.0.0.1:0",
			"--ack-copies", strconv.Itoa(copies))
		dir := t.TempDir()
		et.fullDirs, et.fullFlags = append(et.fullDirs, dir), append(et.fullFlags, flags)
		et.full = append(et.full, startProcess(t, et.bin, dir, flags...))
	}
	for i := range 2 {
		addr := freePort(t)
		et.edgeGossip = append(et.edgeGossip, addr)
		e := startProcessNoWait(t, et.bin, t.TempDir(), append(common(fmt.Sprintf("eu-edge-%d", i), addr), "--role", "edge")...)
		et.edges = append(et.edges, e)
		deadline := time.Now().Add(20 * time.Second)
		for {
			res, err := http.Get(e.url + "/readyz")
			if err == nil {
				res.Body.Close()
				if res.StatusCode == 200 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("edge %d not ready:\n%s", i, e.log.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(et.us.gossip.Members()) != 5 {
		if time.Now().After(deadline) {
			for _, p := range append(append([]*procNode{}, et.full...), et.edges...) {
				t.Logf("%s:\n%s", p.url, p.log.String())
			}
			t.Fatalf("%d members, want 5", len(et.us.gossip.Members()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	et.waitLinks(t)
	return et
}

// replicaOf is full node i's replica id, from its data directory.
func (et *edgeTier) replicaOf(t *testing.T, i int) string {
	t.Helper()
	id, err := os.ReadFile(filepath.Join(et.fullDirs[i], "replica-id"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(id))
}

// destroy kills full node i with SIGKILL and deletes its data directory,
// as a machine lost with its disk: it never comes back. It returns the
// node's replica id, read from that directory first.
func (et *edgeTier) destroy(t *testing.T, i int) (replica string) {
	t.Helper()
	replica = et.replicaOf(t, i)
	et.full[i].cmd.Process.Kill()
	et.full[i].cmd.Wait()
	if err := os.RemoveAll(et.fullDirs[i]); err != nil {
		t.Fatal(err)
	}
	return replica
}

// waitLinks waits for the tier's NATS shape: each edge a leaf of one
// full node and routed to none, the full nodes routed to each other
// only (the edges are in no route mesh) and holding both edges' leaf
// connections.
func (et *edgeTier) waitLinks(t *testing.T) {
	t.Helper()
	nats := func(p *procNode) api.ClusterNATS {
		var v api.ClusterView
		res, err := http.Get(p.url + "/v1/cluster")
		if err == nil {
			json.NewDecoder(res.Body).Decode(&v)
			res.Body.Close()
		}
		if v.NATS == nil {
			return api.ClusterNATS{}
		}
		return *v.NATS
	}
	var seen []string // the NATS view of each process at the last look, for a failure
	defer func() {
		if t.Failed() {
			t.Logf("the tier's NATS at the last look (full nodes, then edges): %s", strings.Join(seen, "; "))
		}
	}()
	// 60 s: on two cores under the race detector, beside the rest of the
	// suite, an edge's leaf connection has taken over 30 s to form.
	testwait.For(t, 60*time.Second, "edges as leaf nodes of the full nodes", func() bool {
		seen = seen[:0]
		leaves, ok := 0, true
		for _, f := range et.full {
			n := nats(f)
			seen = append(seen, fmt.Sprintf("%+v", n))
			ok = ok && n.Routes == 1 && len(n.Gateways) == 1
			leaves += n.LeafNodes
		}
		for _, e := range et.edges {
			n := nats(e)
			seen = append(seen, fmt.Sprintf("%+v", n))
			ok = ok && n.LeafNodes == 1 && n.Routes == 0 && len(n.Gateways) == 0 && n.Connected
		}
		return ok && leaves == len(et.edges)
	})
	// And every edge relays to both of its region's full nodes: a voter's
	// votes then go to the one their voter ranks first through either
	// edge (a retry through the other edge, heard one full node short,
	// would go to the other node before the first vote's ballot did).
	want := []string{et.replicaOf(t, 0), et.replicaOf(t, 1)}
	testwait.For(t, 30*time.Second, "every edge relaying to both of its region's full nodes", func() bool {
		for _, e := range et.edges {
			var v api.ClusterView
			if getJSON(e.url+"/v1/cluster", &v) != 200 {
				return false
			}
			heard := 0
			for _, to := range v.RelaysTo {
				if slices.Contains(want, to.Replica) {
					heard++
				}
			}
			if heard != len(want) {
				return false
			}
		}
		return true
	})
}

// seePoll waits until every process serves the poll.
func (et *edgeTier) seePoll(t *testing.T, poll string) {
	t.Helper()
	for _, p := range append(append([]*procNode{}, et.full...), et.edges...) {
		waitFor(t, func() bool {
			res, err := http.Get(p.url + "/v1/polls/" + poll)
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode == 200
		})
	}
}

// voteAnswer is the first result of a vote request's answer.
type voteAnswer struct {
	code           int
	status, voteID string
	body           string
}

func voteAt(url, poll, option, voter, idem string) voteAnswer {
	code, body, err := post(url+"/v1/polls/"+poll+"/votes", vote(option, voter, idem))
	if err != nil {
		return voteAnswer{body: err.Error()}
	}
	var v struct {
		Results []struct {
			Status string
			VoteID string `json:"vote_id"`
		}
	}
	json.Unmarshal(body, &v)
	a := voteAnswer{code: code, body: string(body)}
	if len(v.Results) > 0 {
		a.status, a.voteID = v.Results[0].Status, v.Results[0].VoteID
	}
	return a
}

// scrapeMetric is the value of an unlabelled metric a node serves.
func scrapeMetric(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("%s: not served", name)
	return 0
}

// TestEdgeTier is the edge tier end to end, in processes: votes through
// both edges over HTTP and the socket are the region's full nodes';
// a retry at the other edge gets the same answer; a full node killed
// with SIGKILL under load loses no acknowledged vote and the edges keep
// answering; with the region's full nodes down another region answers,
// with none at all the edge says 503 with Retry-After, and recovers.
func TestEdgeTier(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	et := startEdgeTier(t)
	et.us.createPollFor(t, "p", 3600)
	et.seePoll(t, "p")

	// HTTP through one edge, the socket through the other.
	first := voteAt(et.edges[0].url, "p", "a", "ann", "ann-1")
	if first.code != 200 || first.status != "accepted" || strings.HasPrefix(first.voteID, et.us.replica) {
		t.Fatalf("a vote through edge 0: %+v (the other region is %s)", first, et.us.replica)
	}
	if again := voteAt(et.edges[1].url, "p", "a", "ann", "ann-1"); again.status != "duplicate" || again.voteID != first.voteID {
		t.Fatalf("its retry at edge 1: %+v, want duplicate %s", again, first.voteID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(et.edges[1].url, "http")+"/v1/polls/p/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.Write(ctx, websocket.MessageText, []byte(`{"type":"vote","ref":"r1","body":{"option":"b","voter":"bob","idem":"bob-1"}}`))
	for {
		_, msg, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(msg), `"ref":"r1"`) {
			if !strings.Contains(string(msg), `"status":"accepted"`) {
				t.Fatalf("a vote on the edge's socket: %s", msg)
			}
			break
		}
	}

	// The edge decodes and checks what it relays: a body that is not a
	// vote and an option the poll does not have are refused at the edge
	// as a full node would refuse them, and relayed to no one.
	relayed := scrapeMetric(t, et.edges[0].url, "tally_relay_requests_total")
	if a := voteAt(et.edges[0].url, "p", "mauve", "cy", "cy-1"); a.code != 422 || !strings.Contains(a.body, `"invalid_option"`) {
		t.Fatalf("an unknown option through the edge: %+v", a)
	}
	if code, body, _ := post(et.edges[0].url+"/v1/polls/p/votes", `{"option":"a","voter":"cy"}`); code != 400 || !strings.Contains(string(body), "idem") {
		t.Fatalf("a vote without its key through the edge: %d %s", code, body)
	}
	// The write another site's page makes its visitors' browsers send
	// (issue 58): refused at the edge and at a full node, relayed to no
	// one; the same vote from a program still counts.
	for _, url := range []string{et.edges[0].url, et.us.url} {
		for _, h := range [][]string{
			{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Content-Type", ""},
			{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"},
			{"Origin", "null", "Content-Type", "application/json"},
			{"Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"},
			{"Content-Type", "text/plain"},
			{"Content-Type", ""},
			{"Content-Type", "application/json; charset=latin1"},
		} {
			code, body, err := post(url+"/v1/polls/p/votes", vote("a", "csrf1", "csrf1"), h...)
			if err != nil || code != http.StatusForbidden && code != http.StatusUnsupportedMediaType {
				t.Fatalf("%s with %q: %d %s %v, want 403 or 415", url, h, code, body, err)
			}
		}
	}
	if now := scrapeMetric(t, et.edges[0].url, "tally_relay_requests_total"); now != relayed {
		t.Fatalf("the edge relayed %v requests it refused itself", now-relayed)
	}
	if a := voteAt(et.edges[0].url, "p", "a", "csrf1", "csrf1"); a.status != "accepted" {
		t.Fatalf("the same vote from a program: %+v", a)
	}

	// SIGKILL of a full node under load through both edges.
	load := startVoteLoad(t, []string{et.edges[0].url, et.edges[1].url, et.edges[0].url, et.edges[1].url}, nil)
	ackedAtLeast := func(what string, n int64) {
		t.Helper()
		testwait.For(t, 60*time.Second, what, func() bool { return load.acked.Load() >= n })
	}
	ackedAtLeast("200 votes acknowledged", 200)
	et.full[0].cmd.Process.Kill()
	et.full[0].cmd.Wait()
	ackedAtLeast("200 more after the kill", load.acked.Load()+200) // the edges keep answering
	load.stop()
	et.full[0] = startProcess(t, et.bin, et.fullDirs[0], et.fullFlags[0]...)

	// Certified exact: every acknowledged vote counts once; a request
	// that failed may have been ledgered before its node died.
	if r := et.us.admin(t, "POST", "/v1/polls/p/close", ""); r.status != http.StatusOK {
		t.Fatal(r.raw)
	}
	var total int64
	testwait.For(t, 40*time.Second, "the edge tier", func() bool {
		r := et.us.call(t, "GET", "/v1/polls/p/result", "")
		if r.body["status"] != "reconciled" {
			return false
		}
		total = int64(r.body["total"].(float64))
		return true
	})
	if want := load.acked.Load() + 3; total < want || total > want+load.failed.Load() { // ann, bob and csrf1 beside the load
		t.Fatalf("certified %d votes: %d acknowledged (and %d failed)", total, want, load.failed.Load())
	}

	// The region's full nodes down: the other region answers.
	et.us.createPoll(t, "q")
	et.seePoll(t, "q")
	for _, p := range et.full {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
	// (Longer than waitFor's 10 s: memberlist must see them gone and NATS
	// drop their interest, which a loaded machine takes a while to.)
	var last voteAnswer
	defer func() {
		if t.Failed() {
			t.Logf("the edge's last answer: %+v", last)
		}
	}()
	testwait.For(t, 40*time.Second, "the other region answering through the edge", func() bool {
		a := voteAt(et.edges[0].url, "q", "a", "cara", "cara-1")
		last = a
		// duplicate: an earlier try was ledgered there but answered after
		// the edge's deadline (a loaded machine); the retry gets its id.
		return (a.status == "accepted" || a.status == "duplicate") && strings.HasPrefix(a.voteID, et.us.replica)
	})
	// None at all: 503 with Retry-After, within the edge's deadline.
	if err := et.us.stop(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 40*time.Second, "the edge tier", func() bool {
		start := time.Now()
		code, _, err := post(et.edges[0].url+"/v1/polls/q/votes", vote("a", "dan", "dan-1"))
		return err == nil && code == http.StatusServiceUnavailable && time.Since(start) < 5*time.Second
	})
	res, err := http.Post(et.edges[0].url+"/v1/polls/q/votes", "application/json", strings.NewReader(vote("a", "dan", "dan-1")))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("no full node: %d, Retry-After %q", res.StatusCode, res.Header.Get("Retry-After"))
	}
	// A full node back: the edge answers again.
	et.full[1] = startProcess(t, et.bin, et.fullDirs[1], append(et.fullFlags[1], "--join", et.edgeGossip[0], "--catch-up-wait", "1s")...) // its peers are gone: do not wait for their ballots
	testwait.For(t, 40*time.Second, "the edge answering again", func() bool {
		s := voteAt(et.edges[0].url, "q", "a", "dan", "dan-1").status
		return s == "accepted" || s == "duplicate"
	})
}

// A stranger on a full node's NATS port: without the cluster's
// credential it is refused at the door; on a connection that has it, a
// batch without the relay's seal is not answered and counts nothing.
func TestStrangerPosingAsAnEdge(t *testing.T) {
	nodes := startCluster(t, []string{"eu-west", "us-east"}, nil)
	full := nodes[0]
	full.createPoll(t, "p")
	url := full.gossip.Mesh().EmbeddedURL()
	if nc, err := nats.Connect(url, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a stranger connected to the cluster's NATS without its credential")
	}
	// On a connection that holds the credential (the other node's own),
	// a batch without the relay's seal.
	nc := nodes[1].gossip.Mesh().Conn()
	batch := relay.AppendBatch(nil, []relay.Request{{Kind: relay.KindVote, Poll: "p", Body: []byte(vote("a", "mallory", "m-1"))}})
	if _, err := nc.Request(relay.Subject(full.cfg.Cluster), batch, 500*time.Millisecond); err == nil {
		t.Fatal("an unsealed relay batch was answered")
	}
	if tot := full.totals(t, "p"); tot["_total"] != 0 {
		t.Fatalf("the stranger's vote counted: %v", tot)
	}
}

// The README's key-less single node: a stranger cannot reach its relay,
// its NATS port refuses the connection. (It also runs no relay server:
// startRelay starts none without a key.)
func TestSingleNodeAnswersNoRelay(t *testing.T) {
	tn := startNode(t, t.TempDir(), func(c *Config) { c.GossipKey = "" })
	tn.createPoll(t, "p")
	if nc, err := nats.Connect(tn.gossip.Mesh().EmbeddedURL(), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a stranger connected to a single node's NATS")
	}
}

// The shape of docker-compose.multi.yml: every node, the edge too, a
// client of its region's external NATS server (no leaf connection), the
// regions' servers joined by gateways. The edge's votes are its region's
// full node's; with that node gone, the other region's, through the
// gateway.
func TestEdgeOnAnExternalNATS(t *testing.T) {
	urls := supercluster(t, []string{"eu-west", "us-east"}, 0)
	eu := startNode(t, t.TempDir(), func(c *Config) { c.Region, c.NATSURL = "eu-west", urls["eu-west"] })
	us := startNode(t, t.TempDir(), func(c *Config) {
		c.Region, c.NATSURL, c.Join = "us-east", urls["us-east"], []string{eu.GossipAddr()}
	})
	edge := startNode(t, t.TempDir(), func(c *Config) {
		c.Region, c.Role, c.AdminToken = "eu-west", "edge", ""
		c.NATSURL, c.Join = urls["eu-west"], []string{eu.GossipAddr()}
		c.CatchUpWait = time.Minute // an edge holds no ballots: it never waits for them
	})
	waitFor(t, func() bool { return len(edge.gossip.Members()) == 3 && len(us.gossip.Members()) == 3 })
	eu.createPoll(t, "p")
	waitFor(t, func() bool { _, ok := edge.state.Defs.Poll("p"); return ok })
	// Until the edge has heard eu-west's full node announce itself ready,
	// it relays to whichever it has heard (failed once in CI: us-east's
	// announcement came first).
	testwait.For(t, 30*time.Second, "the edge relaying to its region's full node first", func() bool {
		ts := edge.edge.Targets()
		return len(ts) > 0 && ts[0].Replica == eu.replica
	})
	a := voteAt(edge.url, "p", "a", "ann", "ann-1")
	if a.status != "accepted" || !strings.HasPrefix(a.voteID, eu.replica+"/") {
		t.Fatalf("a vote through the edge: %+v, want eu-west's %s", a, eu.replica)
	}
	if err := eu.stop(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "us-east answering through the edge", func() bool {
		a = voteAt(edge.url, "p", "b", "bob", "bob-1")
		return (a.status == "accepted" || a.status == "duplicate") && strings.HasPrefix(a.voteID, us.replica+"/")
	})
	if r := edge.call(t, "GET", "/readyz", ""); r.status != http.StatusOK {
		t.Fatalf("the edge with a full node: %d %s", r.status, r.raw)
	}
	// No full node left: the edge says it is not ready, and why.
	if err := us.stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		r := edge.call(t, "GET", "/readyz", "")
		return r.status == http.StatusServiceUnavailable && strings.Contains(r.raw, "no full node")
	})
}

// voteLoad is one client per target sending votes with new keys (as
// voter and key) until stop, 5 ms apart (enough for the tests, and it
// leaves the loaded machine's cores to the nodes), counting the
// acknowledged (200 accepted) and the rest. A refused vote is not
// retried (its key is new each time), but its client backs off 20 ms,
// as a real one would. A test
// that fails logs the counts and the last failure.
type voteLoad struct {
	acked, failed atomic.Int64
	last          atomic.Value // the last failure's status and body
	done          chan struct{}
	wg            sync.WaitGroup
	once          sync.Once
}

// startVoteLoad starts the clients; onAck, when set, sees each
// acknowledgement with its target.
func startVoteLoad(t *testing.T, targets []string, onAck func(target string, a voteAnswer)) *voteLoad {
	t.Helper()
	l := &voteLoad{done: make(chan struct{})}
	for c, url := range targets {
		l.wg.Go(func() {
			pause := time.Duration(0)
			for i := 0; ; i++ {
				select {
				case <-l.done:
					return
				case <-time.After(pause):
				}
				pause = 5 * time.Millisecond
				key := fmt.Sprintf("load-%d-%d", c, i)
				a := voteAt(url, "p", []string{"a", "b", "c"}[i%3], key, key)
				if a.code == 200 && a.status == "accepted" {
					l.acked.Add(1)
					if onAck != nil {
						onAck(url, a)
					}
				} else {
					l.failed.Add(1)
					l.last.Store(fmt.Sprintf("%d %s", a.code, a.body))
					pause = 20 * time.Millisecond
				}
			}
		})
	}
	t.Cleanup(func() {
		l.stop()
		if t.Failed() {
			t.Logf("%s", l)
		}
	})
	return l
}

// stop ends the clients and waits for them.
func (l *voteLoad) stop() {
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
}

func (l *voteLoad) String() string {
	return fmt.Sprintf("%d acknowledged, %d refused or unknown; the last: %v", l.acked.Load(), l.failed.Load(), l.last.Load())
}
