package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"tally/gossip"
)

// socketVote sends a vote on a new live socket of the poll at the node,
// as the client with User-Agent ua, and returns the reply's type ("ack"
// or "error") and, for an error, its code.
func socketVote(t *testing.T, tn *testNode, poll, ua, token, body string) (typ, code string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(tn.url, "http")+"/v1/polls/"+poll+"/live",
		&websocket.DialOptions{HTTPHeader: http.Header{"User-Agent": {ua}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	msg, _ := json.Marshal(map[string]any{"type": "vote", "ref": "r", "token": token, "body": json.RawMessage(body)})
	if err := ws.Write(ctx, websocket.MessageText, msg); err != nil {
		t.Fatal(err)
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("no answer to the vote on the socket: %v", err)
		}
		var m struct {
			Type  string
			Ref   string
			Error struct{ Code string }
		}
		json.Unmarshal(data, &m)
		if m.Ref == "r" {
			return m.Type, m.Error.Code
		}
	}
}

// TestRefusedVotesAreCounted: a vote refused on the live socket is
// counted by reason like an HTTP one, voter-token refusals included, at a
// full node (tally_votes_total) and at an edge (tally_edge_votes_total),
// once: the full node behind the edge counts the refusal it decided in
// tally_votes_total, the edge none there.
func TestRefusedVotesAreCounted(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, []string{"eu", "eu"}, func(i int, c *Config) {
		c.RequireSession, c.PowBits, c.SessionSecret = true, 2, "refusals-test-secret-0123456789"
		if i == 1 {
			c.Role, c.AdminToken = gossip.RoleEdge, ""
		}
	})
	full, edge := nodes[0], nodes[1]
	waitFor(t, func() bool { return edge.call(t, "GET", "/readyz", "").status == http.StatusOK })
	full.createPoll(t, "p")
	havePoll(t, nodes, "p")
	token, _, _ := full.getToken(t, "phone")
	body := func(idem string) string { return fmt.Sprintf(`{"option":"a","voter":"x","idem":%q}`, idem) }
	count := func(tn *testNode, name, reason string) float64 {
		return metricValue(t, []*testNode{tn}, name, `reason="`+reason+`"`)
	}

	// At the full node: the socket, then HTTP.
	if typ, code := socketVote(t, full, "p", "laptop", token, body("k1")); code != "session_mismatch" {
		t.Fatalf("a token from another client on the full node's socket: %s %s", typ, code)
	}
	if typ, code := socketVote(t, full, "p", "phone", "garbage", body("k2")); code != "session_invalid" {
		t.Fatalf("a bad token on the full node's socket: %s %s", typ, code)
	}
	if r := full.call(t, "POST", "/v1/polls/p/votes", body("k3"), "User-Agent", "phone"); r.code() != "session_required" {
		t.Fatalf("no token over HTTP at the full node: %d %s", r.status, r.raw)
	}
	for reason, want := range map[string]float64{"session_mismatch": 1, "session_invalid": 1, "session_required": 1} {
		if got := count(full, "tally_votes_total", reason); got != want {
			t.Errorf("full node: tally_votes_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}

	// Through the edge: the socket, then HTTP, then a vote it takes.
	if typ, code := socketVote(t, edge, "p", "laptop", token, body("k4")); code != "session_mismatch" {
		t.Fatalf("a token from another client on the edge's socket: %s %s", typ, code)
	}
	if r := edge.call(t, "POST", "/v1/polls/p/votes", `{"votes":[`+body("k5")+`,`+body("k6")+`]}`, "User-Agent", "phone"); r.code() != "session_required" {
		t.Fatalf("a batch without a token over HTTP at the edge: %d %s", r.status, r.raw)
	}
	if typ, code := socketVote(t, edge, "p", "phone", token, body("k7")); typ != "ack" {
		t.Fatalf("a good token on the edge's socket: %s %s", typ, code)
	}
	for _, c := range []struct {
		tn          *testNode
		name        string
		reason      string
		want        float64
		description string
	}{
		{edge, "tally_edge_votes_total", "session_mismatch", 1, "the edge counts its socket client's refusal"},
		{edge, "tally_edge_votes_total", "session_required", 2, "the edge counts its HTTP client's refused batch, a vote each"},
		{full, "tally_votes_total", "session_mismatch", 2, "the full node counts the refusal it decided for the edge"},
		{full, "tally_votes_total", "session_required", 3, "the full node counts the refused batch it decided for the edge"},
		{edge, "tally_votes_total", "session_mismatch", 0, "the edge decides nothing: no second count in the cluster's sum"},
	} {
		if got := count(c.tn, c.name, c.reason); got != c.want {
			t.Errorf("%s: %s{reason=%q} = %v, want %v", c.description, c.name, c.reason, got, c.want)
		}
	}
	if got := metricValue(t, []*testNode{edge}, "tally_edge_votes_total", `result="accepted"`); got != 1 {
		t.Errorf("the edge's accepted vote: tally_edge_votes_total{result=\"accepted\"} = %v, want 1", got)
	}

	// The edge's own refusal: no full node answers.
	if err := full.stop(); err != nil {
		t.Fatal(err)
	}
	typ, code := socketVote(t, edge, "p", "phone", token, body("k8"))
	if code != "unavailable" && code != "outcome_unknown" { // unknown: the full node was still taking batches as it stopped
		t.Fatalf("a vote on the edge's socket with no full node: %s %s", typ, code)
	}
	if got := count(edge, "tally_edge_votes_total", code); got != 1 {
		t.Errorf("the edge's own answer: tally_edge_votes_total{reason=%q} = %v, want 1", code, got)
	}
}
