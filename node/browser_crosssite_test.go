package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"
)

// crossSitePage is a page of another site that tries, in its visitors'
// browsers, every write a page can send without asking the node first —
// fetch with no-cors (a text body, a typeless Blob), a JSON fetch (which
// needs a preflight), a voter session, two form posts, a WebSocket vote —
// and frames the node's embed. window.done lists each attempt's outcome
// as it ends.
const crossSitePage = `<!doctype html><html lang="en"><head><title>Another site</title></head><body>
<iframe name="sink" title="sink"></iframe>
<form id="plain" method="POST" enctype="text/plain" target="sink" action="NODE/v1/polls/p/votes"><input name='{"option":"a","voter":"form1","idem":"form1","pad":"' value='"}'></form>
<form id="url" method="POST" target="sink" action="NODE/v1/polls/p/votes"><input name="option" value="a"><input name="voter" value="form2"><input name="idem" value="form2"></form>
<iframe id="embed" title="embed" src="NODE/embed/p"></iframe>
<script>
window.done = [];
const node = "NODE";
const vote = v => JSON.stringify({option: "a", voter: v, idem: v});
const note = (name, p) => p.then(r => done.push(name + ":" + r.type), e => done.push(name + ":refused"));
note("text", fetch(node + "/v1/polls/p/votes", {method: "POST", mode: "no-cors", body: vote("text")}));
note("blob", fetch(node + "/v1/polls/p/votes", {method: "POST", mode: "no-cors", body: new Blob([vote("blob")])}));
note("json", fetch(node + "/v1/polls/p/votes", {method: "POST", headers: {"Content-Type": "application/json"}, body: vote("json")}));
note("session", fetch(node + "/v1/session", {method: "POST", mode: "no-cors"}));
const ws = new WebSocket(node.replace(/^http/, "ws") + "/v1/polls/p/live");
ws.onopen = () => { done.push("ws:open"); ws.send(JSON.stringify({type: "vote", ref: "1", body: JSON.parse(vote("socket"))})); };
ws.onmessage = m => { if (JSON.parse(m.data).type === "ack") done.push("ws:ack"); };
ws.onclose = () => done.push("ws:closed");
const sink = document.querySelector("iframe[name=sink]");
const post = id => new Promise(ok => { sink.onload = () => ok({type: "loaded"}); document.getElementById(id).submit(); });
note("form-text", post("plain")).then(() => note("form-url", post("url")));
</script></body></html>`

// embedderPage is a page of a site --origins allows: it frames the embed
// (which tells its height once it runs) and votes with a JSON fetch, which
// its browser sends after a preflight the node answers yes.
const embedderPage = `<!doctype html><html lang="en"><head><title>Partner</title></head><body>
<iframe title="vote" src="NODE/embed/p"></iframe>
<script>
window.embedded = false;
window.msgs = [];
addEventListener("message", e => { msgs.push(e.origin + " " + JSON.stringify(e.data)); if (e.origin === "NODE" && e.data && e.data.type === "tally:resize") window.embedded = true; });
fetch("NODE/v1/polls/p/votes", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({option: "b", voter: "fan", idem: "fan"})})
  .then(r => r.json()).then(j => window.voted = j.results[0].status, e => window.voted = "error: " + e);
</script></body></html>`

// TestBrowserNoWebsiteVotesForItsVisitors: a page of another site makes
// its visitor's browser try every write it can (issue 58); none changes a
// count, the embed is not framed there, and a site --origins names frames
// it and votes. Real browser, real names: Chromium resolves vote.test,
// evil.test and partner.test to this machine, so the pages are cross-site
// as on the Internet.
func TestBrowserNoWebsiteVotesForItsVisitors(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	addr := freePort(t)
	_, port, _ := net.SplitHostPort(addr)
	node := "http://vote.test:" + port // the public address: a name, as on the Internet
	tn := startNode(t, t.TempDir(), func(c *Config) {
		c.HTTPAddr, c.PublicURL, c.Origins = addr, node, []string{"partner.test:*"}
	})
	tn.createPoll(t, "p")
	serve := func(page string) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, strings.ReplaceAll(page, "NODE", node))
		}))
		t.Cleanup(s.Close)
		_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
		return p
	}
	evil, partner := serve(crossSitePage), serve(embedderPage)
	ctx := browser(t, chromedp.Flag("host-resolver-rules", "MAP *.test 127.0.0.1"))

	framed := make(chan string, 1)
	logCtx, stopLog := context.WithCancel(ctx)
	defer stopLog()
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	go func() {
		for m, err := range chromedp.Console(logCtx) {
			if err != nil {
				return
			}
			mu.Lock()
			seen = append(seen, m.Text)
			mu.Unlock()
			if strings.Contains(m.Text, "frame-ancestors") {
				select {
				case framed <- m.Text:
				default:
				}
			}
		}
	}()
	// The allowed embedder first: its vote counts, its embed runs.
	if err := chromedp.Do(ctx, chromedp.Navigate("http://partner.test:"+partner), until(`window.voted !== undefined && window.embedded`)); err != nil {
		t.Fatal(fmt.Errorf("%w: the embedder's vote %s, its embed framed: %s %s; console: %q", err, must(t, ctx, `String(window.voted)`), must(t, ctx, `String(window.embedded)`), must(t, ctx, `JSON.stringify(window.msgs)`), seen))
	}
	if got := must(t, ctx, `String(window.voted)`); got != "accepted" {
		t.Fatalf("the embedder's vote: %s", got)
	}

	// Another site: every attempt ends, refused, and the embed is not
	// framed (Chromium logs the frame-ancestors refusal).
	attempts := []string{"text", "blob", "json", "session", "ws", "form-text", "form-url"}
	var ended []string
	for _, a := range attempts {
		ended = append(ended, fmt.Sprintf(`done.some(d => d.startsWith(%q))`, a+":"))
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://evil.test:"+evil), until(`window.done && done.includes("ws:closed") && `+strings.Join(ended, " && "))); err != nil {
		t.Fatal(fmt.Errorf("%w: %s", err, must(t, ctx, `JSON.stringify(window.done)`)))
	}
	done := must(t, ctx, `JSON.stringify(window.done)`)
	if strings.Contains(done, "ws:open") || strings.Contains(done, "ws:ack") || strings.Contains(done, `"json:cors"`) {
		t.Fatalf("a cross-site write got through: %s", done)
	}
	select {
	case <-framed:
	case <-time.After(30 * time.Second):
		t.Fatal("Chromium never refused to frame the embed on another site")
	}
	if tot := tn.totals(t, "p"); tot["a"] != 0 || tot["b"] != 1 || tot["_total"] != 1 {
		t.Fatalf("totals %v after another site's attempts (%s), want the embedder's vote alone", tot, done)
	}
	// Nothing of theirs reached the ledger either.
	r := tn.admin(t, "GET", "/v1/polls/p/ledger", "")
	for _, v := range []string{"text", "blob", "json", "form1", "form2", "socket"} {
		if strings.Contains(r.raw, `"`+v+`"`) {
			t.Fatalf("the ledger holds another site's vote %q: %s", v, r.raw)
		}
	}
}
