package node

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"tally/api"
)

// startCluster starts one node per region entry, each joining the first.
func startCluster(t testing.TB, regions []string, mutate func(i int, c *Config)) []*testNode {
	t.Helper()
	if testing.Short() {
		t.Skip("an in-process cluster: not in the -short inner loop")
	}
	var nodes []*testNode
	for i, region := range regions {
		nodes = append(nodes, startNode(t, t.TempDir(), func(c *Config) {
			c.Region = region
			c.PushPull = 500 * time.Millisecond
			if i > 0 {
				c.Join = []string{nodes[0].GossipAddr()}
			}
			if mutate != nil {
				mutate(i, c)
			}
		}))
	}
	waitFor(t, func() bool {
		for _, n := range nodes {
			if len(n.gossip.Members()) != len(nodes) {
				return false
			}
		}
		return true
	})
	return nodes
}

// havePoll waits until every node knows the poll.
func havePoll(t testing.TB, nodes []*testNode, poll string) {
	t.Helper()
	waitFor(t, func() bool {
		for _, n := range nodes {
			if _, ok := n.state.Defs.Poll(poll); !ok {
				return false
			}
		}
		return true
	})
}

// agree waits until every node shows want for the poll.
func agree(t testing.TB, nodes []*testNode, poll string, want map[string]int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		same := true
		var got map[string]int64
		for _, n := range nodes {
			r := n.call(t, "GET", "/v1/polls/"+poll, "")
			got = map[string]int64{}
			if tot, ok := r.body["totals"].(map[string]any); ok {
				for k, v := range tot {
					got[k] = int64(v.(float64))
				}
			}
			if !maps.Equal(got, want) {
				same = false
				break
			}
		}
		if same {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes do not agree on %v (last seen %v)", want, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestClusterOfThreeRegions(t *testing.T) {
	nodes := startCluster(t, []string{"eu-west", "us-east", "ap-south"}, nil)
	nodes[0].createPoll(t, "p")
	havePoll(t, nodes, "p")
	for i, n := range nodes {
		for v := range i + 1 {
			n.vote(t, "p", "a", fmt.Sprintf("v%d-%d", i, v))
		}
		n.vote(t, "p", "b", fmt.Sprintf("w%d", i))
	}
	agree(t, nodes, "p", map[string]int64{"a": 6, "b": 3, "c": 0})

	// The cluster endpoint lists every member and region, and every
	// replica once its heartbeat arrived.
	var view api.ClusterView
	waitFor(t, func() bool {
		view = api.ClusterView{}
		json.Unmarshal([]byte(nodes[1].call(t, "GET", "/v1/cluster", "").raw), &view)
		return len(view.Replicas) == 3
	})
	if len(view.Members) != 3 || len(view.Regions) != 3 || len(view.Replicas) != 3 || !view.NATS.Connected {
		t.Fatalf("cluster view: %+v", view)
	}
	for _, m := range view.Members {
		if m.Replica == "" || m.HTTPAddr == "" || m.Role != "full" || m.State != "alive" {
			t.Fatalf("member: %+v", m)
		}
	}

	// A close in one region reaches all.
	for _, n := range nodes {
		n.clock.advance(time.Second)
	}
	if r := nodes[2].admin(t, "POST", "/v1/polls/p/close", ""); r.status != http.StatusOK {
		t.Fatalf("close: %d %s", r.status, r.raw)
	}
	for _, n := range nodes {
		n.clock.advance(time.Second)
	}
	waitFor(t, func() bool {
		for _, n := range nodes {
			if n.call(t, "GET", "/v1/polls/p", "").body["status"] != "closed" {
				return false
			}
		}
		return true
	})
}

// TestClusterOfFive: two regions with two nodes each (routes inside the
// region, gateways between) and a third region; a node restarted keeps its
// replica and its counts, and catches up on what it missed.
func TestClusterOfFive(t *testing.T) {
	t.Parallel()
	regions := []string{"eu-west", "eu-west", "us-east", "us-east", "ap-south"}
	nodes := startCluster(t, regions, nil)
	nodes[3].createPoll(t, "p")
	havePoll(t, nodes, "p")
	for i, n := range nodes {
		n.vote(t, "p", []string{"a", "b", "c"}[i%3], fmt.Sprintf("v%d", i))
	}
	agree(t, nodes, "p", map[string]int64{"a": 2, "b": 2, "c": 1})

	victim := nodes[2]
	replica := victim.replica
	if err := victim.stop(); err != nil {
		t.Fatal(err)
	}
	nodes[0].vote(t, "p", "c", "while-down")
	restarted := startNode(t, victim.cfg.DataDir, func(c *Config) {
		c.Region, c.Join, c.NodeName, c.PushPull = "us-east", []string{nodes[0].GossipAddr()}, victim.cfg.NodeName, 500*time.Millisecond
	})
	if restarted.replica != replica {
		t.Fatalf("replica changed across restart: %s → %s", replica, restarted.replica)
	}
	nodes[2] = restarted
	restarted.vote(t, "p", "a", "after-restart")
	agree(t, nodes, "p", map[string]int64{"a": 3, "b": 2, "c": 2})
}

// TestEdgeNode: an edge serves polls and live streams from gossiped state,
// with the freshness vector, takes votes by relaying them to a full node
// (here of another region: its own has none), and refuses admin writes.
func TestEdgeNode(t *testing.T) {
	nodes := startCluster(t, []string{"eu-west", "us-east"}, func(i int, c *Config) {
		if i == 1 {
			c.Role = "edge"
		}
	})
	full, edge := nodes[0], nodes[1]
	full.createPoll(t, "p")
	full.vote(t, "p", "b", "x")
	agree(t, nodes, "p", map[string]int64{"a": 0, "b": 1, "c": 0})

	for _, req := range [][2]string{{"POST", "/v1/polls"}, {"POST", "/v1/polls/p/close"}, {"GET", "/v1/polls/p/ledger"}, {"GET", "/v1/backup"}} {
		r := edge.admin(t, req[0], req[1], `{"option":"a","voter":"v","idem":"i"}`)
		if r.status != http.StatusMisdirectedRequest || r.code() != "edge_node" {
			t.Errorf("%s %s on an edge: %d %s", req[0], req[1], r.status, r.raw)
		}
	}
	// Whatever the token (an edge holds none of the cluster's), 421.
	for _, req := range [][2]string{{"POST", "/v1/quizzes/q/start"}, {"GET", "/v1/polls/p/ledger"}} {
		if r := edge.call(t, req[0], req[1], ""); r.status != http.StatusMisdirectedRequest || r.code() != "edge_node" {
			t.Errorf("%s %s at an edge without a token: %d %s", req[0], req[1], r.status, r.raw)
		}
	}
	// A vote at the edge is the full node's: its status, its replica's
	// vote id; a retry at the full node gets the same answer.
	status, id := edge.castVote(t, "p", "a", "y", "edge-1")
	if status != "accepted" || !strings.HasPrefix(id, full.replica+"/") {
		t.Fatalf("a vote at the edge: %s %s (full node %s)", status, id, full.replica)
	}
	if s, again := full.castVote(t, "p", "a", "y", "edge-1"); s != "duplicate" || again != id {
		t.Fatalf("its retry at the full node: %s %s, want duplicate %s", s, again, id)
	}
	// A token from the full node holds at the edge, however long the
	// User-Agent it is bound to (the edge relays its first 1 KiB, which is
	// what binds it); an overlong token is what a full node says it is.
	full.createPoll(t, "p2")
	waitFor(t, func() bool { _, ok := edge.state.Defs.Poll("p2"); return ok })
	ua := "Mozilla/5.0 " + strings.Repeat("x", 1500)
	tok, _, _ := full.getToken(t, ua)
	if r := edge.call(t, "POST", "/v1/polls/p2/votes", vote("b", "ignored", "edge-tok"), "User-Agent", ua, "Tally-Session", tok); r.status != http.StatusOK {
		t.Errorf("a full node's token at the edge with a long User-Agent: %d %s", r.status, r.raw)
	}
	long := strings.Repeat("t", 2049)
	for _, at := range []*testNode{full, edge} {
		if r := at.call(t, "POST", "/v1/polls/p2/votes", vote("b", "z", "edge-long"), "Tally-Session", long); r.status != http.StatusUnauthorized || r.code() != "session_invalid" {
			t.Errorf("an overlong token at %s: %d %s", at.cfg.Role, r.status, r.raw)
		}
	}
	if r := edge.call(t, "POST", "/v1/polls/p/votes", `{"option":"zz","voter":"y","idem":"edge-2"}`); r.status != http.StatusUnprocessableEntity || r.code() != "invalid_option" {
		t.Fatalf("a bad vote at the edge: %d %s", r.status, r.raw)
	}
	agree(t, nodes, "p", map[string]int64{"a": 1, "b": 1, "c": 0})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(edge.url, "http")+"/v1/polls/p/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	_, data, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var snap struct {
		Type    string           `json:"type"`
		Total   int64            `json:"total"`
		Region  string           `json:"region"`
		Regions map[string]int64 `json:"regions"`
	}
	if err := json.Unmarshal(data, &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Type != "snapshot" || snap.Total != 2 || snap.Region != "us-east" {
		t.Fatalf("snapshot from the edge: %s", data)
	}
	if _, ok := snap.Regions["eu-west"]; !ok || snap.Regions["us-east"] != 0 {
		t.Fatalf("freshness vector: %v", snap.Regions)
	}
}

// A node with --admin-addr announces the admin listener's bound address
// in the membership (admin_addr of its member entry, everywhere), and
// there its own GET /v1/cluster is whole: what tally cluster asks an edge
// without being told where. A node without one announces none.
func TestClusterMembersAnnounceAdminAddr(t *testing.T) {
	nodes := startCluster(t, []string{"eu-west", "eu-west"}, func(i int, c *Config) {
		if i == 1 {
			c.Role, c.AdminAddr = "edge", "127.0.0.1:0"
		}
	})
	full, edge := nodes[0], nodes[1]
	var view api.ClusterView
	if err := json.Unmarshal([]byte(full.call(t, "GET", "/v1/cluster", "").raw), &view); err != nil || len(view.Members) != 2 {
		t.Fatalf("the full node's view: %v %+v", err, view)
	}
	for _, m := range view.Members {
		want := ""
		if m.Name == edge.cfg.NodeName {
			want = edge.AdminAddr()
		}
		if m.AdminAddr != want {
			t.Errorf("member %s: admin_addr %q, want %q", m.Name, m.AdminAddr, want)
		}
	}
	res, err := http.Get("http://" + edge.AdminAddr() + "/v1/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var ev api.ClusterView
	if err := json.NewDecoder(res.Body).Decode(&ev); err != nil || ev.Self != edge.cfg.NodeName || len(ev.Members) != 2 {
		t.Fatalf("the edge at its announced admin address: %v %+v", err, ev)
	}
}

// TestGossipKeyCluster: nodes sharing --gossip-key form a cluster; a node
// without it stays outside.
func TestGossipKeyCluster(t *testing.T) {
	key := "MDEyMzQ1Njc4OWFiY2RlZg==" // 16 bytes
	nodes := startCluster(t, []string{"eu-west", "us-east"}, func(i int, c *Config) { c.GossipKey = key })
	stranger := startNode(t, t.TempDir(), func(c *Config) { c.Region, c.Join = "ap-south", []string{nodes[0].GossipAddr()} })
	if n := len(stranger.gossip.Members()); n != 1 {
		t.Fatalf("a node without the key sees %d members", n)
	}
	if n := len(nodes[0].gossip.Members()); n != 2 {
		t.Fatalf("the keyed cluster sees %d members", n)
	}
}

// TestGossipKeyRotation: mid-rotation, a node still encrypting with the old
// key and one already on the new key understand each other, because both
// hold both keys.
func TestGossipKeyRotation(t *testing.T) {
	old, next := "MDEyMzQ1Njc4OWFiY2RlZg==", "ZmVkY2JhOTg3NjU0MzIxMA=="
	keys := []string{old + "," + next, next + "," + old}
	nodes := startCluster(t, []string{"eu-west", "us-east"}, func(i int, c *Config) { c.GossipKey = keys[i] })
	nodes[0].createPoll(t, "p")
	havePoll(t, nodes, "p")
	stranger := startNode(t, t.TempDir(), func(c *Config) {
		c.Region, c.Join, c.GossipKey = "ap-south", []string{nodes[0].GossipAddr()}, "MTExMTExMTExMTExMTExMQ=="
	})
	if n := len(stranger.gossip.Members()); n != 1 {
		t.Fatalf("a node with neither key sees %d members", n)
	}
}

// TestReplicaIdentity: a data dir keeps its replica id across restarts; a
// fresh data dir (a node that lost its disk) gets a new one, and the
// cluster counts its new votes apart from the old replica's.
func TestReplicaIdentity(t *testing.T) {
	nodes := startCluster(t, []string{"eu-west", "us-east"}, nil)
	nodes[0].createPoll(t, "p")
	havePoll(t, nodes, "p")
	nodes[1].vote(t, "p", "a", "before")
	agree(t, nodes, "p", map[string]int64{"a": 1, "b": 0, "c": 0})
	old := nodes[1]
	if err := old.stop(); err != nil {
		t.Fatal(err)
	}
	// The disk is lost: same region, same node name, empty data dir.
	fresh := startNode(t, t.TempDir(), func(c *Config) {
		c.Region, c.Join, c.NodeName, c.PushPull = "us-east", []string{nodes[0].GossipAddr()}, old.cfg.NodeName, 500*time.Millisecond
	})
	if fresh.replica == old.replica {
		t.Fatalf("a fresh data dir reused replica id %s", old.replica)
	}
	// It learns the old replica's count from the cluster and adds its own
	// under the new id: 1 + 1, not max(1, 1).
	nodes[1] = fresh
	fresh.vote(t, "p", "a", "after")
	agree(t, nodes, "p", map[string]int64{"a": 2, "b": 0, "c": 0})
}

// TestExternalSuperclusterWithLatency: nodes on their regions' own NATS
// servers (the deployment's topology), gateways delayed 50 ms each way,
// push/pull out of the way: polls and votes cross on the NATS path alone.
// (BenchmarkVoteToViewerAcrossRegions measures the same path.)
func TestExternalSuperclusterWithLatency(t *testing.T) {
	t.Parallel()
	regions := []string{"eu-west", "us-east", "ap-south"}
	urls := supercluster(t, regions, 50*time.Millisecond)
	nodes := startCluster(t, regions, func(i int, c *Config) {
		c.NATSURL, c.PushPull = urls[regions[i]], time.Hour
	})
	nodes[0].createPoll(t, "p")
	havePoll(t, nodes, "p")
	nodes[0].vote(t, "p", "a", "x")
	nodes[1].vote(t, "p", "b", "y")
	agree(t, nodes, "p", map[string]int64{"a": 1, "b": 1, "c": 0})
	var view api.ClusterView
	json.Unmarshal([]byte(nodes[2].call(t, "GET", "/v1/cluster", "").raw), &view)
	if view.NATS.Embedded || !view.NATS.Connected {
		t.Fatalf("nats view: %+v", view.NATS)
	}
}
