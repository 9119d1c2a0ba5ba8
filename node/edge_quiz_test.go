package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"tally/session"
)

// A quiz participant who joins through an edge is checked by a full node
// of the edge's region, which holds the session secret: a valid token
// counts among the joined — at the edge and at the other region — under
// the token's voter whatever id the message names, and a forged one does
// not count (issue 45, item 5: an edge checked tokens against a secret it
// does not have, so no one who joined through an edge counted, and a
// socket could join there under any id).
func TestQuizJoinThroughAnEdge(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	et := startEdgeTier(t)
	defer func() {
		if t.Failed() {
			for _, p := range append(append([]*procNode{}, et.full...), et.edges...) {
				l := p.log.String()
				t.Logf("%s's log, the end:\n%s", p.url, l[max(0, len(l)-2500):])
			}
		}
	}()
	if r := et.us.admin(t, "POST", "/v1/quizzes", pubQuiz); r.status != http.StatusCreated {
		t.Fatalf("create quiz: %d %s", r.status, r.raw)
	}
	edge := et.edges[0]
	waitFor(t, func() bool {
		res, err := http.Get(edge.url + "/v1/quizzes/pub")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	token, voter := edgeToken(t, edge.url, "phone")

	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	// dial opens a socket and returns it with its first quiz frame (the
	// hub's current snapshot, which may already count the participant).
	dial := func(url, ua string) (*websocket.Conn, map[string]any) {
		t.Helper()
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/v1/quizzes/pub/live",
			&websocket.DialOptions{HTTPHeader: http.Header{"User-Agent": {ua}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.CloseNow() })
		first, _ := frameUntil(t, ctx, ws, func(m map[string]any) bool { return m["type"] == "quiz" })
		return ws, first
	}
	// join joins as the client does: a join no full node could check yet
	// is refused with 503 unavailable, and sent again.
	join := func(ws *websocket.Conn, claimed, tok string) string {
		t.Helper()
		for {
			ws.Write(ctx, websocket.MessageText, []byte(`{"type":"join","ref":"j","voter":"`+claimed+`","token":"`+tok+`","name":"Zoë `+claimed+`"}`))
			ack, _ := frameUntil(t, ctx, ws, func(m map[string]any) bool { return m["ref"] == "j" })
			if e, _ := ack["error"].(map[string]any); e != nil && e["code"] == "unavailable" && ctx.Err() == nil {
				t.Logf("join refused for now: %v", e["message"])
				select { // the client's backoff, shortened
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
				continue
			}
			res, _ := ack["result"].(map[string]any)
			v, _ := res["voter"].(string)
			return v
		}
	}
	phone, _ := dial(edge.url, "phone")
	if got := join(phone, "someone-else", token); got != voter {
		t.Fatalf("joined through the edge as %q, want the token's voter %q", got, voter)
	}
	forger, _ := dial(edge.url, "phone")
	if got := join(forger, "mallory", token+"x"); got != "mallory" {
		t.Fatalf("a forged token joined as %q", got)
	}
	// One counted participant, seen at the edge and at the other region,
	// and named in both lobbies (the edge's newest joiners travel in the
	// gossip); the forged join's name nowhere.
	// The watcher's first frame may count it already (on a loaded machine
	// the edge's report can reach the other region before the watcher
	// does): then no later frame changes the count, and waiting for one
	// failed this test for many runs.
	watcher, first := dial(et.us.url, "studio")
	joinedIn := func(m map[string]any) bool {
		j, _ := m["joined"].(float64)
		names, _ := m["newest"].([]any)
		return m["type"] == "quiz" && j >= 1 && len(names) > 0
	}
	for name, ws := range map[string]*websocket.Conn{"the edge": phone, "the other region": watcher} {
		m := first
		if ws != watcher || !joinedIn(first) {
			m, _ = frameUntil(t, ctx, ws, joinedIn)
		}
		if m["joined"] != 1.0 {
			t.Fatalf("at %s: %v joined, want 1 (the forged join does not count)", name, m["joined"])
		}
		if names, _ := m["newest"].([]any); len(names) != 1 || names[0] != "Zoë someone-else" {
			t.Fatalf("at %s: the lobby names %v, want only the counted join's name", name, m["newest"])
		}
	}
	// The name travelled with the lobby's report, with who holds it: at
	// the other region a look-alike (a Greek Ζ) from another participant
	// is refused, saying why.
	other, _ := dial(et.us.url, "laptop")
	other.Write(ctx, websocket.MessageText, []byte(`{"type":"join","ref":"l","voter":"mallory","name":"Ζoë someone-else"}`))
	ack, _ := frameUntil(t, ctx, other, func(m map[string]any) bool { return m["ref"] == "l" })
	if e, _ := ack["error"].(map[string]any); e == nil || e["code"] != "invalid_request" || !strings.Contains(fmt.Sprint(e["message"]), "looks like another participant") {
		t.Fatalf("a look-alike of the edge's participant's name, at the other region: %v", ack)
	}
}

// edgeToken earns a voter token through an edge: the challenge and the
// solution go to the same full node (the edge routes both by address).
func edgeToken(t *testing.T, url, ua string) (token, voter string) {
	t.Helper()
	ask := func(body string) map[string]any {
		req, _ := http.NewRequest("POST", url+"/v1/session", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", ua)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		json.NewDecoder(res.Body).Decode(&m)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("session at the edge: %d %v", res.StatusCode, m)
		}
		return m
	}
	m := ask("")
	if m["status"] == "challenge" {
		ch, bits := m["challenge"].(string), int(m["bits"].(float64))
		nonce := 0
		for session.LeadingZeroBits(ch, strconv.Itoa(nonce)) < bits {
			nonce++
		}
		b, _ := json.Marshal(map[string]string{"challenge": ch, "nonce": strconv.Itoa(nonce)})
		m = ask(string(b))
	}
	if m["status"] != "issued" {
		t.Fatalf("no token: %v", m)
	}
	return m["token"].(string), m["voter"].(string)
}
