package node

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"tally/api"
	"tally/gossip"
	"tally/receipt"
)

// A vote through an edge — over HTTP and on its live socket — is answered
// with a receipt signed by the full node that ledgered it, which verifies
// with that node's key at GET /v1/cluster/keys; and a voter's proof asked
// of the edge is the full node's answer, status and body alike.
func TestEdgeVotesCarryReceipts(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, []string{"eu", "eu"}, func(i int, c *Config) {
		if i == 1 {
			c.Role, c.AdminToken = gossip.RoleEdge, ""
		}
	})
	full, edge := nodes[0], nodes[1]
	waitFor(t, func() bool { return edge.call(t, "GET", "/readyz", "").status == http.StatusOK })
	full.createPoll(t, "p")
	havePoll(t, nodes, "p")
	keys := replicaKeys(t, edge.url)
	check := func(how string, res api.VoteResult) *receipt.Receipt {
		t.Helper()
		rc := res.Receipt
		if res.Status != api.StatusAccepted || rc == nil {
			t.Fatalf("%s: %+v, want accepted with a receipt", how, res)
		}
		if rc.Poll != "p" || rc.VoteID != res.VoteID || rc.Stamp != res.Stamp || rc.Replica() != full.replica {
			t.Fatalf("%s: receipt %+v for the vote %s at %s", how, rc, res.VoteID, res.Stamp)
		}
		if err := rc.Verify(keys[rc.Replica()]); err != nil {
			t.Fatalf("%s: the receipt does not verify with %s's key: %v", how, rc.Replica(), err)
		}
		return rc
	}

	r := edge.call(t, "POST", "/v1/polls/p/votes", `{"option":"a","voter":"ann","idem":"ann-1"}`)
	var v api.VoteResponse
	if err := json.Unmarshal([]byte(r.raw), &v); r.status != http.StatusOK || err != nil || len(v.Results) != 1 {
		t.Fatalf("a vote over HTTP through the edge: %d %s", r.status, r.raw)
	}
	rc := check("HTTP", v.Results[0])
	check("socket", socketResult(t, edge, "p", `{"option":"b","voter":"bob","idem":"bob-1"}`))

	// A proof of the receipt's leaf: the edge answers what the full node
	// does (the poll is open: not certified yet), and refuses a leaf that
	// cannot be one itself.
	path := "/v1/polls/p/proofs/" + rc.Leaf
	want, got := full.call(t, "GET", path, ""), edge.call(t, "GET", path, "")
	if got.status != want.status || got.raw != want.raw || want.status == http.StatusOK {
		t.Fatalf("a proof through the edge: %d %s\nat the full node: %d %s", got.status, got.raw, want.status, want.raw)
	}
	if bad := edge.call(t, "GET", "/v1/polls/p/proofs/"+strings.ToUpper(rc.Leaf), ""); bad.status != http.StatusBadRequest || bad.code() != api.CodeInvalidRequest {
		t.Fatalf("an upper-case leaf at the edge: %d %s", bad.status, bad.raw)
	}
}

// replicaKeys reads GET /v1/cluster/keys, by replica.
func replicaKeys(t *testing.T, url string) map[string]ed25519.PublicKey {
	t.Helper()
	var ks api.ClusterKeys
	if code := getJSON(url+"/v1/cluster/keys", &ks); code != http.StatusOK {
		t.Fatalf("GET /v1/cluster/keys: %d", code)
	}
	m := map[string]ed25519.PublicKey{}
	for _, k := range ks.Keys {
		m[k.Replica] = k.PublicKey
	}
	return m
}

// socketResult sends a vote on a new live socket of the poll at the node
// and returns its result, from the ack.
func socketResult(t *testing.T, tn *testNode, poll, body string) api.VoteResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(tn.url, "http")+"/v1/polls/"+poll+"/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	msg, _ := json.Marshal(map[string]any{"type": "vote", "ref": "r", "body": json.RawMessage(body)})
	if err := ws.Write(ctx, websocket.MessageText, msg); err != nil {
		t.Fatal(err)
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("no answer to the vote on the socket: %v", err)
		}
		var m struct {
			Type   string
			Ref    string
			Result api.VoteResponse
		}
		json.Unmarshal(data, &m)
		if m.Ref != "r" {
			continue
		}
		if m.Type != api.TypeAck || len(m.Result.Results) != 1 {
			t.Fatalf("the socket's answer: %s", data)
		}
		return m.Result.Results[0]
	}
}

// An edge sends TRQ5 only while every full node reads it: one full node
// of v0.5.0 (protocol 2), or of a release before (1), closes the gate;
// edges of any release do not.
func TestReceiptsGate(t *testing.T) {
	member := func(role string, proto int) gossip.Member { return gossip.Member{Role: role, Protocol: proto} }
	for _, c := range []struct {
		name    string
		members []gossip.Member
		want    bool
	}{
		{"this release", []gossip.Member{member(gossip.RoleFull, gossip.Protocol), member(gossip.RoleEdge, gossip.Protocol)}, true},
		{"a release after", []gossip.Member{member(gossip.RoleFull, gossip.Protocol), member(gossip.RoleFull, gossip.Protocol+1)}, true},
		{"a full node of v0.5.0", []gossip.Member{member(gossip.RoleFull, gossip.Protocol), member(gossip.RoleFull, 2)}, false},
		{"a full node of v0.4.0", []gossip.Member{member(gossip.RoleFull, 1)}, false},
		{"an edge of v0.5.0", []gossip.Member{member(gossip.RoleFull, gossip.Protocol), member(gossip.RoleEdge, 2)}, true},
	} {
		if got := allReadReceipts(c.members); got != c.want {
			t.Errorf("%s: %t, want %t", c.name, got, c.want)
		}
	}
}
