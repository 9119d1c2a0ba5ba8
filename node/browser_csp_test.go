package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	tallyjs "tally/clients/js"
	"tally/ids"
	"tally/web"
)

// A strict Content-Security-Policy on every page (issue 58; docs/page.md,
// "Content-Security-Policy"): every response that is a page or leads to
// one names each directive, and no view breaks the policy — each view of
// a poll, an event and a quiz in its phases opens in Chromium with real
// content, and the browser's own reports (securitypolicyviolation events,
// heard by a listener added before any of the page's scripts runs) must
// be none. Chromium drops what the policy refuses without a word on the
// screen: a style attribute simply does not apply.

// wantCSP is the policy of a page response, directive by directive:
// frame-ancestors as given, images from this node, data: and the
// --logo-hosts, and everything else from this node alone.
func wantCSP(ancestors, img string) map[string]string {
	return map[string]string{
		"default-src": "'self'", "script-src": "'self'", "style-src": "'self'", "connect-src": "'self'",
		"img-src": img, "object-src": "'none'", "base-uri": "'none'", "form-action": "'self'",
		"frame-ancestors": ancestors,
	}
}

// parseCSP splits a Content-Security-Policy header into its directives.
func parseCSP(h string) map[string]string {
	out := map[string]string{}
	for _, d := range strings.Split(h, ";") {
		if f := strings.Fields(d); len(f) > 0 {
			out[f[0]] = strings.Join(f[1:], " ")
		}
	}
	return out
}

// cspListener collects the violations a document reports in its
// window.cspViolations; Chromium runs it in every frame before the
// frame's own scripts (and an evaluation over the DevTools protocol, like
// this one, is not subject to the policy).
const cspListener = `window.cspViolations = [];
addEventListener("securitypolicyviolation", e => cspViolations.push(e.effectiveDirective + " refused " + (e.blockedURI || "?") +
  " at " + e.sourceFile + ":" + e.lineNumber + (e.sample ? " (" + e.sample + ")" : "")), true);`

// takeViolations reads and clears the violations of the page and its
// frames of the same origin (the host's studio preview).
const takeViolations = `JSON.stringify([window, ...Array.from(window)].flatMap(w => {
  try { const v = w.cspViolations || []; w.cspViolations = []; return v; } catch { return []; }
}))`

// TestBrowserPagesKeepAStrictCSP: the header of every page response is
// the whole policy, and every view of a poll, an event, a quiz (lobby,
// question, reveal with its split and standings, podium) and the host's
// pages runs without a violation in Chromium — its live stream on a
// WebSocket of the node's own origin ('self' covers ws:), its voter
// puzzle in a Worker, its styles from style.css and the CSSOM.
func TestBrowserPagesKeepAStrictCSP(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	tn := startNode(t, t.TempDir(), func(c *Config) {
		c.Origins = []string{"*.broadcaster.example"}
		c.LogoHosts = []string{"cdn.example.com"}
	})
	tn.createPoll(t, "p")
	for i, o := range []string{"a", "a", "b"} {
		tn.castVote(t, "p", o, fmt.Sprint("v", i), fmt.Sprint("v", i))
	}
	if r := tn.admin(t, "POST", "/v1/polls", `{"id":"e1","event":"e","question":"Who wins?","options":[{"id":"x","label":"Xi"},{"id":"y","label":"Yara"}],"duration_s":600}`); r.status != http.StatusCreated {
		t.Fatalf("create the event's poll: %d %s", r.status, r.raw)
	}
	tn.castVote(t, "e1", "y", "v0", "e0")
	if r := tn.admin(t, "POST", "/v1/quizzes", pubQuiz); r.status != http.StatusCreated {
		t.Fatalf("create the quiz: %d %s", r.status, r.raw)
	}

	// The header, on every page, its files and the join address's
	// redirect (read as it is, not followed).
	const img = "'self' data: https://cdn.example.com"
	direct := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/", "/index.html", "/app.js", "/style.css", "/present/p", "/overlay/p", "/embed/p",
		"/present/event/e", "/overlay/event/e", "/present/quiz/pub", "/overlay/quiz/pub",
		"/j/" + ids.JoinCode(ids.JoinPoll, "p"), "/j/zzzzzz"} {
		res, err := direct.Get(tn.url + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		want := wantCSP("'self'", img)
		if strings.HasPrefix(path, "/embed/") {
			want["frame-ancestors"] = "'self' https://*.broadcaster.example http://*.broadcaster.example"
		}
		if got := parseCSP(res.Header.Get("Content-Security-Policy")); !maps.Equal(got, want) {
			t.Errorf("%s (%d): Content-Security-Policy %q,\nwant %v", path, res.StatusCode, res.Header.Get("Content-Security-Policy"), want)
		}
	}

	ctx := browserWithin(t, 90*time.Second)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800), func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspListener})
		return chromedp.Void{}, err
	}); err != nil {
		t.Fatal(err)
	}
	views := 0
	// view opens path, waits until ready holds, and fails the test on any
	// violation the page (or its frames) reported meanwhile.
	view := func(path, ready string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(tn.url+path), until(ready)); err != nil {
			t.Fatalf("%s: %v (violations %s)", path, err, must(t, ctx, takeViolations))
		}
		clean(t, ctx, path)
		views++
	}

	view("/", `/Which\?/.test(document.querySelector(".polls")?.textContent) && !!document.querySelector("#join-code")`)
	// The voter taps: the vote goes on the page's WebSocket, after the
	// voter token's puzzle ran in a Worker.
	view("/#/poll/p", `!!document.querySelector("#conn")?.textContent.includes("WebSocket")`)
	if err := chromedp.Do(ctx, chromedp.Click(`button[data-option="b"]`),
		until(`document.querySelector('button[data-option="b"] .count').textContent === "2 votes"`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return tn.totals(t, "p")["b"] == 2 })
	clean(t, ctx, "a vote")
	view("/j/"+ids.JoinCode(ids.JoinPoll, "p"), `location.hash === "#/poll/p" && !!document.querySelector('button[data-option="a"]')`)
	view("/j/zzzzzz", `document.querySelector("#join-msg")?.textContent.length > 0`)
	view("/present/p", `document.querySelector("#total")?.textContent === "4 votes" && document.querySelector(".qr img")?.complete && document.querySelector(".qr img").naturalWidth > 0`)
	view("/overlay/p?theme=dark&accent=ff0066", `document.querySelectorAll(".option").length === 3`)
	view("/embed/p", `document.querySelectorAll(".option").length === 3`)
	view("/present/event/e", `document.querySelector("#total")?.textContent === "1 vote"`)
	view("/overlay/event/e", `document.querySelectorAll(".option").length === 2`)
	// The host's pages, with the admin token in this tab.
	if err := chromedp.Do(ctx, void(chromedp.Evaluate[bool](`sessionStorage.setItem("tally.token", "`+testToken+`"), true`))); err != nil {
		t.Fatal(err)
	}
	view("/#/host", `!!document.querySelector("#question") && /Which\?/.test(document.querySelector(".polls")?.textContent)`)
	view("/#/host/p", `!!document.querySelector("#close") && document.querySelector('[data-option="b"] .count')?.textContent === "2 votes"`)

	// The quiz: its lobby, a question, the reveal with the split and the
	// standings, the host's page with its studio preview, the podium.
	view("/#/quiz/pub", `!!document.querySelector("#quiz-status")?.textContent.includes("Waiting for the host")`)
	view("/present/quiz/pub", `document.body.dataset.phase === "lobby" && !!document.querySelector(".qr img")?.complete`)
	tn.admin(t, "POST", "/v1/quizzes/pub/start", "")
	view("/present/quiz/pub", `document.body.dataset.phase === "question" && document.querySelectorAll(".tile").length === 2`)
	view("/overlay/quiz/pub", `document.querySelector(".lower-third")?.hidden === false`)
	view("/#/quiz/pub", `document.querySelectorAll("#q-options .tile").length === 2`)
	tn.clock.advance(2 * time.Second)
	if err := chromedp.Do(ctx, chromedp.SendKeys("#quiz-name", "Zoë"), chromedp.Click(`button[data-option="b"]`),
		until(`document.querySelector("#q-result").textContent.startsWith("Answer sent")`)); err != nil {
		t.Fatal(err)
	}
	clean(t, ctx, "an answer")
	if r := tn.admin(t, "POST", "/v1/polls/pub-1/votes", `{"option":"a","voter":"x","idem":"x","name":"Xi"}`); r.status != http.StatusOK {
		t.Fatalf("a second participant: %d %s", r.status, r.raw)
	}
	tn.clock.advance(time.Second)
	tn.admin(t, "POST", "/v1/quizzes/pub/close", "")
	tn.closeTakesEffect(t, "pub-1")
	tn.admin(t, "POST", "/v1/quizzes/pub/reveal", "")
	tn.clock.advance(5 * time.Second) // certification
	view("/present/quiz/pub", `document.body.dataset.phase === "reveal" && document.querySelectorAll(".split .bar").length === 2 && document.querySelectorAll(".standings li").length === 2`)
	// The bars take their widths through the CSSOM, as the policy allows
	// (a refused style attribute leaves the split's bar empty and every
	// standings bar full): b's share, and the leader's score against 0.
	const widths = `JSON.stringify([document.querySelector('.tile[data-option="b"] .split .bar'), ...document.querySelectorAll(".standings li .bar span")].map(e => e.getBoundingClientRect().width))`
	var w []float64
	json.Unmarshal([]byte(must(t, ctx, widths)), &w)
	if len(w) != 3 || w[0] == 0 || w[1] == 0 || w[2] != 0 {
		t.Errorf("the bars' widths are %v, want b's share and the standings' 950 and 0 points", w)
	}
	view("/#/quiz/pub", `!!document.querySelector("#q-result")?.textContent.startsWith("Correct!") && !!document.querySelector(".podium li")`)
	view("/#/host/quiz/pub", `document.querySelector("#quiz-host-state")?.textContent === "Question 1 of 3 is closed." && window[0]?.document.body?.dataset.phase === "reveal"`)
	tn.admin(t, "POST", "/v1/quizzes/pub/end", "")
	tn.clock.advance(5 * time.Second)
	view("/present/quiz/pub", `document.body.dataset.phase === "podium" && document.querySelectorAll(".podium-steps .step").length === 2`)
	view("/overlay/quiz/pub", `document.querySelector(".lower-third")?.hidden === true`)
	t.Logf("%d views opened", views)
}

// clean fails the test on the violations the tab's page reported, and
// clears them.
func clean(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	var v []string
	json.Unmarshal([]byte(must(t, ctx, takeViolations)), &v)
	if len(v) > 0 {
		t.Errorf("%s: %d Content-Security-Policy violations:\n%s", what, len(v), strings.Join(v, "\n"))
	}
}

// TestPageSourcesKeepTheCSP reads the page's files and the client for
// what the policy refuses, on paths a browser test may never take (an
// error, a rare phase): inline script or handler attributes in the HTML,
// a style attribute written as text (in HTML, through setAttribute or the
// page's el() helper: the helper takes style as an object and applies it
// through the CSSOM), HTML built from strings, and code from strings.
func TestPageSourcesKeepTheCSP(t *testing.T) {
	refused := []struct {
		ext, why string
		re       *regexp.Regexp
	}{
		{".html", "an inline script", regexp.MustCompile(`<script\b[^>]*>[^<\s]`)},
		{".html", "a <style> element", regexp.MustCompile(`<style\b`)},
		{".html", "a style attribute", regexp.MustCompile(`<[^>]*\sstyle\s*=`)},
		{".html", "an event-handler attribute", regexp.MustCompile(`<[^>]*\son[a-z]+\s*=`)},
		{".js", "a style attribute set as text", regexp.MustCompile(`setAttribute\(\s*["'` + "`" + `]style|\bstyle:\s*["'` + "`" + `]`)},
		{".js", "an event-handler attribute set as text", regexp.MustCompile(`setAttribute\(\s*["'` + "`" + `]on`)},
		{".js", "HTML built from a string", regexp.MustCompile(`\.(innerHTML|outerHTML)\s*[+]?=|insertAdjacentHTML|document\.write|createContextualFragment`)},
		{".js", "code from a string", regexp.MustCompile(`\beval\(|new Function\(|set(Timeout|Interval)\(\s*["'` + "`" + `]`)},
	}
	files := map[string]string{"client.js": string(tallyjs.Source)}
	err := fs.WalkDir(web.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(web.FS(), path)
		files[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range files {
		for _, r := range refused {
			if !strings.HasSuffix(name, r.ext) {
				continue
			}
			for _, m := range r.re.FindAllStringIndex(src, -1) {
				t.Errorf("%s:%d: %s, which the page's Content-Security-Policy refuses: %q", name, 1+strings.Count(src[:m[0]], "\n"), r.why, src[m[0]:m[1]])
			}
		}
	}
}

// TestFrameAncestorsSayWhatOriginsSay: the embed's frame-ancestors names
// each --origins pattern CSP can say as path.Match means it, and leaves
// out the rest (a browser would ignore them, or read them otherwise).
func TestFrameAncestorsSayWhatOriginsSay(t *testing.T) {
	p := &pages{cfg: &Config{Origins: []string{"www.broadcaster.example", "*.broadcaster.example", "127.0.0.1:*", "tv.example:8443", "*",
		"[a-z]*.example", "a*.example", "www.*.example", "tv.example:", "tv.example:80x", "-bad.example"}}}
	want := "'self' https://www.broadcaster.example http://www.broadcaster.example https://*.broadcaster.example http://*.broadcaster.example" +
		" https://127.0.0.1:* http://127.0.0.1:* https://tv.example:8443 http://tv.example:8443 https://* http://*"
	if got := p.frameAncestors(); got != want {
		t.Fatalf("frame-ancestors %s,\nwant %s", got, want)
	}
}
