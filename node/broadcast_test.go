package node

import (
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"tally/state"
)

// dialLive opens a WebSocket viewer of the poll at the node.
func dialLive(t *testing.T, tn *testNode, poll string) (*websocket.Conn, context.Context) {
	t.Helper()
	return dialWS(t, tn, "/v1/polls/"+poll+"/live")
}

// dialWS opens a WebSocket to path at the node.
func dialWS(t *testing.T, tn *testNode, path string) (*websocket.Conn, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(tn.url, "http")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return ws, ctx
}

// frameUntil reads frames until one satisfies cond, and returns it with
// every frame read on the way (raw).
func frameUntil(t *testing.T, ctx context.Context, ws *websocket.Conn, cond func(map[string]any) bool) (map[string]any, []string) {
	t.Helper()
	var seen []string
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("no such frame (read %d): %v; frames: %s", len(seen), err, strings.Join(seen, "\n"))
		}
		seen = append(seen, string(data))
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		if cond(m) {
			return m, seen
		}
	}
}

// TestHiddenPollShowsNoCountsUntilRevealed: a poll created hidden counts
// votes but shows no count on any public endpoint or frame — through the
// close and certification — until the host reveals it; the admin token
// sees the counts all along.
func TestHiddenPollShowsNoCountsUntilRevealed(t *testing.T) {
	tn := startNode(t, t.TempDir(), nil)
	if r := tn.admin(t, "POST", "/v1/polls", `{"id":"h","question":"Secret?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":60,"grace_s":1,"hidden":true}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.raw)
	} else if r.body["hidden"] != true || r.body["totals"] == nil {
		t.Fatalf("the host's answer to the create: %s", r.raw)
	}
	ws, ctx := dialLive(t, tn, "h")
	for _, v := range []string{"v1", "v2", "v3"} {
		tn.castVote(t, "h", "a", v, v)
	}
	tn.castVote(t, "h", "b", "v4", "v4")
	waitFor(t, func() bool { r := tn.admin(t, "GET", "/v1/polls/h", ""); return r.body["total"] == 4.0 })

	leaks := func(where, raw string) {
		t.Helper()
		for _, word := range []string{`"totals"`, `"leader"`, `"events"`, `"digest"`, `"a":`, `"b":`} {
			if strings.Contains(raw, word) {
				t.Fatalf("%s shows counts of a hidden poll (%s): %s", where, word, raw)
			}
		}
	}
	check := func() {
		t.Helper()
		r := tn.call(t, "GET", "/v1/polls/h", "")
		if r.status != 200 || r.body["hidden"] != true || r.body["total"] != nil {
			t.Fatalf("public view: %d %s", r.status, r.raw)
		}
		leaks("GET /v1/polls/h", r.raw)
		r = tn.call(t, "GET", "/v1/polls", "")
		leaks("GET /v1/polls", r.raw)
		if r := tn.call(t, "GET", "/v1/polls/h/result", ""); r.status != http.StatusForbidden || r.code() != "result_hidden" {
			t.Fatalf("result of a hidden poll: %d %s", r.status, r.raw)
		}
		if r := tn.call(t, "GET", "/v1/polls/h", "", "Authorization", "Bearer wrong"); r.status != http.StatusUnauthorized {
			t.Fatalf("a wrong token: %d %s", r.status, r.raw)
		}
		if r := tn.admin(t, "GET", "/v1/polls/h", ""); r.body["total"] != 4.0 {
			t.Fatalf("the host does not see the counts: %s", r.raw)
		}
	}
	check()
	// Frames: the viewer's first frame and the ones the votes caused.
	_, frames := frameUntil(t, ctx, ws, func(m map[string]any) bool { return m["viewers"] == 1.0 })
	for _, f := range frames {
		leaks("a frame", f)
		if !strings.Contains(f, `"hidden":true`) {
			t.Fatalf("a frame of a hidden poll without hidden: %s", f)
		}
	}

	// Through the close and certification it stays hidden.
	tn.clock.advance(62 * time.Second)
	waitFor(t, func() bool { c, ok := tn.state.Defs.Certificate("h"); return ok && c.Status == state.Reconciled })
	check()
	final, frames := frameUntil(t, ctx, ws, func(m map[string]any) bool { return m["type"] == "final" })
	for _, f := range frames {
		leaks("a frame", f)
	}
	if final["hidden"] != true {
		t.Fatalf("final frame: %v", final)
	}

	// Reveal: counts everywhere, the stream included.
	if r := tn.call(t, "POST", "/v1/polls/h/reveal", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("reveal without the token: %d", r.status)
	}
	if r := tn.admin(t, "POST", "/v1/polls/h/reveal", ""); r.status != 200 || r.body["hidden"] != nil {
		t.Fatalf("reveal: %d %s", r.status, r.raw)
	}
	if r := tn.admin(t, "POST", "/v1/polls/h/reveal", ""); r.status != 200 {
		t.Fatalf("a second reveal: %d %s", r.status, r.raw)
	}
	if got := tn.totals(t, "h"); got["a"] != 3 || got["b"] != 1 || got["_total"] != 4 {
		t.Fatalf("revealed totals %v", got)
	}
	if r := tn.call(t, "GET", "/v1/polls/h/result", ""); r.status != 200 || r.body["total"] != 4.0 {
		t.Fatalf("revealed result: %d %s", r.status, r.raw)
	}
	final, _ = frameUntil(t, ctx, ws, func(m map[string]any) bool { return m["type"] == "final" && m["hidden"] == nil })
	if final["total"] != 4.0 || final["digest"] == "" || final["digest"] == nil {
		t.Fatalf("the revealed final frame: %v", final)
	}
}

// TestRevealWhileOpen: the frame that reveals an open hidden poll carries
// every option's count (issue 25: a diff at the reveal left the leader at
// zero on every screen), and the hidden poll's stream sent nothing per
// vote before it.
func TestRevealWhileOpen(t *testing.T) {
	tn := startNode(t, t.TempDir(), nil)
	if r := tn.admin(t, "POST", "/v1/polls", `{"id":"h","question":"Who?","options":[{"id":"sam","label":"Sam"},{"id":"alex","label":"Alex"},{"id":"jordan","label":"Jordan"}],"duration_s":600,"grace_s":1,"hidden":true}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	ws, ctx := dialLive(t, tn, "h")
	frameUntil(t, ctx, ws, func(m map[string]any) bool { return m["type"] == "snapshot" && m["viewers"] == 1.0 })
	want := map[string]int{"sam": 3, "alex": 5, "jordan": 2}
	n := 0
	for opt, k := range want {
		for range k {
			n++
			tn.castVote(t, "h", opt, fmt.Sprintf("v%d", n), fmt.Sprintf("k%d", n))
		}
	}
	waitFor(t, func() bool { return tn.admin(t, "GET", "/v1/polls/h", "").body["total"] == 10.0 })
	if r := tn.admin(t, "POST", "/v1/polls/h/reveal", ""); r.status != 200 {
		t.Fatalf("reveal: %d %s", r.status, r.raw)
	}
	first, frames := frameUntil(t, ctx, ws, func(m map[string]any) bool { return m["hidden"] == nil })
	for _, f := range frames[:len(frames)-1] {
		if !strings.Contains(f, `"hidden":true`) || strings.Contains(f, `"totals"`) {
			t.Fatalf("a frame before the reveal: %s", f)
		}
	}
	if len(frames) > 2 { // the viewer count may change once; a vote never sends a frame
		t.Fatalf("a hidden poll's stream sent %d frames for ten votes:\n%s", len(frames)-1, strings.Join(frames, "\n"))
	}
	totals, _ := first["totals"].(map[string]any)
	if first["type"] != "snapshot" || first["total"] != 10.0 || len(totals) != 3 ||
		totals["sam"] != 3.0 || totals["alex"] != 5.0 || totals["jordan"] != 2.0 {
		t.Fatalf("the reveal frame is not whole: %v", first)
	}
}

// TestRevealWithNoVotes: a hidden poll revealed before anyone voted sends
// a whole snapshot of zeros, every option in it, never a frame with no
// totals.
func TestRevealWithNoVotes(t *testing.T) {
	tn := startNode(t, t.TempDir(), nil)
	if r := tn.admin(t, "POST", "/v1/polls", `{"id":"z","question":"Who?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":600,"hidden":true}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	ws, ctx := dialLive(t, tn, "z")
	frameUntil(t, ctx, ws, func(m map[string]any) bool { return m["type"] == "snapshot" })
	if r := tn.admin(t, "POST", "/v1/polls/z/reveal", ""); r.status != 200 {
		t.Fatalf("reveal: %d %s", r.status, r.raw)
	}
	first, _ := frameUntil(t, ctx, ws, func(m map[string]any) bool { return m["hidden"] == nil })
	totals, _ := first["totals"].(map[string]any)
	if first["type"] != "snapshot" || first["total"] != 0.0 || len(totals) != 2 || totals["a"] != 0.0 || totals["b"] != 0.0 {
		t.Fatalf("the reveal frame of an empty poll: %v", first)
	}
}

// TestHiddenPollCountsStayOffPublicMetrics: with metrics on the public
// port (the default), a hidden poll's voter-state gauges — its counts by
// another name — are absent until the reveal; on --admin-addr they are
// there for the operator (issue 25, item 5).
func TestHiddenPollCountsStayOffPublicMetrics(t *testing.T) {
	for _, adminAddr := range []string{"", "127.0.0.1:0"} {
		tn := startNode(t, t.TempDir(), func(c *Config) { c.AdminAddr = adminAddr })
		tn.admin(t, "POST", "/v1/polls", `{"id":"secret","question":"?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":60,"hidden":true}`)
		for i := range 7 {
			tn.castVote(t, "secret", "a", fmt.Sprint("v", i), fmt.Sprint("k", i))
		}
		gauge := func() (float64, bool) {
			mfs, err := tn.reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() == "tally_voter_state_voters" {
					for _, m := range mf.GetMetric() {
						if m.GetLabel()[0].GetValue() == "secret" {
							return m.GetGauge().GetValue(), true
						}
					}
				}
			}
			return 0, false
		}
		if v, ok := gauge(); ok == (adminAddr == "") {
			t.Fatalf("admin addr %q: tally_voter_state_voters{poll=\"secret\"} present %v (%v)", adminAddr, ok, v)
		}
		tn.admin(t, "POST", "/v1/polls/secret/reveal", "")
		if v, ok := gauge(); !ok || v != 7 {
			t.Fatalf("after the reveal: %v %v", v, ok)
		}
	}
}

// TestExtendAPoll: the host moves an open poll's close later; nothing
// else moves it, and a closed poll stays closed.
func TestExtendAPoll(t *testing.T) {
	tn := startNode(t, t.TempDir(), nil)
	tn.createPoll(t, "p")
	before := int64(tn.admin(t, "GET", "/v1/polls/p", "").body["closes_at"].(float64))
	for _, c := range []struct {
		body   string
		status int
	}{
		{``, 400}, {`{}`, 400}, {`{"by_s":30,"closes_at":1}`, 400}, {`{"by_s":0}`, 400}, {`{"by_s":-5}`, 400},
		{`{"by_s":1e300}`, 400}, {`{"closes_at":1}`, 400}, {`{"closes_at":9223372036854775807}`, 400},
		{`{"by_s":"30"}`, 400}, {`{"by_s":30,"x":1}`, 400}, {strings.Repeat(" ", 2000) + `{"by_s":30}`, 413},
	} {
		if r := tn.admin(t, "POST", "/v1/polls/p/extend", c.body); r.status != c.status {
			t.Fatalf("extend %q: %d %s, want %d", c.body, r.status, r.raw, c.status)
		}
	}
	if after := int64(tn.admin(t, "GET", "/v1/polls/p", "").body["closes_at"].(float64)); after != before {
		t.Fatalf("refused extensions moved the close: %d → %d", before, after)
	}
	if r := tn.call(t, "POST", "/v1/polls/p/extend", `{"by_s":30}`); r.status != http.StatusUnauthorized {
		t.Fatalf("extend without the token: %d", r.status)
	}
	if r := tn.admin(t, "POST", "/v1/polls/nope/extend", `{"by_s":30}`); r.status != http.StatusNotFound {
		t.Fatalf("extend an unknown poll: %d", r.status)
	}
	r := tn.admin(t, "POST", "/v1/polls/p/extend", `{"by_s":30}`)
	if r.status != 200 || int64(r.body["closes_at"].(float64)) != before+30_000 {
		t.Fatalf("extend by 30 s: %d %s", r.status, r.raw)
	}
	r = tn.admin(t, "POST", "/v1/polls/p/extend", `{"closes_at":`+jsonInt(before+120_000)+`}`)
	if r.status != 200 || int64(r.body["closes_at"].(float64)) != before+120_000 {
		t.Fatalf("extend to a time: %d %s", r.status, r.raw)
	}
	// Past the first close the poll still takes votes.
	tn.clock.advance(90 * time.Second)
	if s, _ := tn.castVote(t, "p", "a", "late-but-extended", "k1"); s != "accepted" {
		t.Fatalf("a vote after the first close of an extended poll: %s", s)
	}
	tn.admin(t, "POST", "/v1/polls/p/close", "")
	tn.clock.advance(time.Second)
	if r := tn.admin(t, "POST", "/v1/polls/p/extend", `{"by_s":30}`); r.status != http.StatusConflict || r.code() != "poll_closed" {
		t.Fatalf("extend a closed poll: %d %s", r.status, r.raw)
	}
}

func jsonInt(v int64) string { b, _ := json.Marshal(v); return string(b) }

// TestPollsOfAnEvent: polls created with an event are listed together.
func TestPollsOfAnEvent(t *testing.T) {
	tn := startNode(t, t.TempDir(), nil)
	for _, p := range []struct{ id, event string }{{"q1", "show"}, {"q2", "show"}, {"other", ""}, {"q3", "another-show"}} {
		body := `{"id":"` + p.id + `","question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]`
		if p.event != "" {
			body += `,"event":"` + p.event + `"`
		}
		if r := tn.admin(t, "POST", "/v1/polls", body+`}`); r.status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", p.id, r.status, r.raw)
		}
	}
	r := tn.call(t, "GET", "/v1/polls?event=show", "")
	var ids []string
	for _, p := range r.body["polls"].([]any) {
		ids = append(ids, p.(map[string]any)["id"].(string))
	}
	if strings.Join(ids, ",") != "q2,q1" {
		t.Fatalf("polls of the event: %v", ids)
	}
	if r := tn.call(t, "GET", "/v1/polls?event=nobody", ""); len(r.body["polls"].([]any)) != 0 {
		t.Fatalf("an event with no polls: %s", r.raw)
	}
	for _, bad := range []string{`""`, `"has space"`, `"` + strings.Repeat("e", 200) + `"`, `7`} {
		body := `{"question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"event":` + bad + `}`
		if r := tn.admin(t, "POST", "/v1/polls", body); r.status != http.StatusBadRequest && !(bad == `""` && r.status == http.StatusCreated) {
			t.Fatalf("event %s: %d %s", bad, r.status, r.raw)
		}
	}
}

// TestOriginsMayEmbedAndRead: --origins lets the named sites frame the
// embed and read the public endpoints; nobody else.
func TestOriginsMayEmbedAndRead(t *testing.T) {
	tn := startNode(t, t.TempDir(), func(c *Config) { c.Origins = []string{"*.broadcaster.example"} })
	tn.createPoll(t, "p")
	for _, path := range []string{"/v1/polls", "/v1/polls/p", "/v1/polls/p/result"} {
		r := tn.call(t, "GET", path, "", "Origin", "https://www.broadcaster.example")
		if got := r.header.Get("Access-Control-Allow-Origin"); got != "https://www.broadcaster.example" {
			t.Fatalf("%s from an allowed origin: ACAO %q", path, got)
		}
		for _, o := range []string{"https://evil.example", "https://broadcaster.example.evil.example", "null", "not a url"} {
			if got := tn.call(t, "GET", path, "", "Origin", o).header.Get("Access-Control-Allow-Origin"); got != "" {
				t.Fatalf("%s from %q: ACAO %q", path, o, got)
			}
		}
	}
	embed := tn.call(t, "GET", "/embed/p", "")
	if csp := embed.header.Get("Content-Security-Policy"); embed.status != 200 || !strings.Contains(csp, "https://*.broadcaster.example") {
		t.Fatalf("embed: %d CSP %q", embed.status, csp)
	}
	for _, path := range []string{"/", "/present/p", "/overlay/p"} {
		if csp := tn.call(t, "GET", path, "").header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "frame-ancestors 'self';") {
			t.Fatalf("%s may be framed: CSP %q", path, csp)
		}
	}
}

// TestQRCodeOfTheVotingPage: the presenter's QR code encodes the voting
// address (--public-url when set) and is a PNG of the size asked.
func TestQRCodeOfTheVotingPage(t *testing.T) {
	tn := startNode(t, t.TempDir(), func(c *Config) { c.PublicURL = "https://vote.example.com" })
	tn.createPoll(t, "p")
	res, err := tn.client.Get(tn.url + "/v1/polls/p/qr.png?size=256")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	img, err := png.Decode(res.Body)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("qr: %d %v", res.StatusCode, err)
	}
	if b := img.Bounds(); b.Dx() != 256 || b.Dy() != 256 {
		t.Fatalf("qr size %v", b)
	}
	if got := res.Header.Get("X-Tally-Vote-URL"); got != "https://vote.example.com/#/poll/p" {
		t.Fatalf("vote URL %q", got)
	}
	for path, status := range map[string]int{"/v1/polls/nope/qr.png": 404, "/v1/polls/p/qr.png?size=5": 400,
		"/v1/polls/p/qr.png?size=99999999999": 400, "/v1/polls/p/qr.png?size=-1": 400, "/v1/polls/p/qr.png?size=2e2": 400} {
		if r := tn.call(t, "GET", path, ""); r.status != status {
			t.Fatalf("%s: %d, want %d", path, r.status, status)
		}
	}
}

// TestQRCodeIsCachedAndLimited: an image once drawn is served from memory
// (a hundred requests for it all succeed, far past the draw budget), new
// images are drawn within a node-wide budget (past it: 429 with
// Retry-After), and a quiz question not yet started has none (issue 25).
func TestQRCodeIsCachedAndLimited(t *testing.T) {
	tn := startNode(t, t.TempDir(), nil)
	tn.createPoll(t, "p")
	first := tn.call(t, "GET", "/v1/polls/p/qr.png?size=300", "")
	for i := range 100 {
		if r := tn.call(t, "GET", "/v1/polls/p/qr.png?size=300", ""); r.status != 200 || r.raw != first.raw {
			t.Fatalf("request %d for a drawn image: %d", i, r.status)
		}
	}
	refused := 0
	for size := 128; size < 128+100; size++ {
		res, err := tn.client.Get(fmt.Sprintf("%s/v1/polls/p/qr.png?size=%d", tn.url, size))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode == http.StatusTooManyRequests {
			refused++
			if res.Header.Get("Retry-After") == "" {
				t.Fatal("a refused draw without Retry-After")
			}
		} else if res.StatusCode != 200 {
			t.Fatalf("size %d: %d", size, res.StatusCode)
		}
	}
	if refused == 0 {
		t.Fatal("100 new images were all drawn at once: no draw budget")
	}
	tn.admin(t, "POST", "/v1/quizzes", pubQuiz)
	if r := tn.call(t, "GET", "/v1/polls/pub-1/qr.png", ""); r.status != http.StatusNotFound {
		t.Fatalf("the QR of a quiz question not yet started: %d", r.status)
	}
}

// TestViewersAreCountedAcrossRegions: every region's frames count the
// poll's viewers everywhere, and the first frame counts its own viewer.
func TestViewersAreCountedAcrossRegions(t *testing.T) {
	nodes := startCluster(t, []string{"eu", "us"}, nil)
	nodes[0].createPoll(t, "p")
	havePoll(t, nodes, "p")
	ws, ctx := dialLive(t, nodes[0], "p")
	first, _ := frameUntil(t, ctx, ws, func(map[string]any) bool { return true })
	if first["viewers"] != 1.0 {
		t.Fatalf("the first frame counts %v viewers", first["viewers"])
	}
	dialLive(t, nodes[1], "p")
	dialLive(t, nodes[1], "p")
	// A change of the count alone goes out at most once a second of the
	// nodes' clocks, which are the test's: move them along.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				advanceAll(nodes, 300*time.Millisecond)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	frameUntil(t, ctx, ws, func(m map[string]any) bool { return m["viewers"] == 3.0 })
}
