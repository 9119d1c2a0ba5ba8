package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"tally/state"
)

// The page's views in headless Chromium, at a phone's size and a desktop's:
// the voter's (before and after a tap, scheduled, closed, final), the
// presenter screen, the overlay, the embed inside another site's iframe and
// the host's (hidden → reveal, extend, close with confirmation). Every view
// runs axe-core and fails on a serious or critical violation. Screenshots go
// to a temporary directory, or to docs/screenshots with
// TALLY_SCREENSHOTS=docs (./scripts/screenshots.sh).

var sizes = []struct {
	name string
	w, h int64
}{{"phone", 390, 844}, {"desktop", 1280, 800}}

// axeScript returns axe-core's source, skipping the test where it is not
// installed — except in CI, where .ci/run installs it.
func axeScript(t *testing.T) string {
	t.Helper()
	paths := []string{os.Getenv("TALLY_AXE")}
	if home, err := os.UserHomeDir(); err == nil {
		paths = append(paths, filepath.Join(home, ".cache/tally-axe/node_modules/axe-core/axe.min.js"))
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		if b, err := os.ReadFile(p); err == nil {
			return string(b)
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("axe-core is not installed; .ci/run installs it from npm")
	}
	t.Skip("axe-core is not installed (npm install --prefix ~/.cache/tally-axe axe-core@4); skipping the browser views")
	return ""
}

// checkView runs axe on the page as it stands and saves a screenshot.
func checkView(t *testing.T, ctx context.Context, axe, name string) {
	t.Helper()
	checkAxe(t, ctx, axe, name)
	screenshot(t, ctx, name)
}

// checkAxe runs axe on the page as it stands and fails the test on a
// serious or critical violation.
func checkAxe(t *testing.T, ctx context.Context, axe, name string) {
	t.Helper()
	js := axe + `;
axe.run(document, { resultTypes: ["violations"] }).then(r => JSON.stringify(r.violations
  .filter(v => v.impact === "serious" || v.impact === "critical")
  .map(v => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(" ") + ": " + n.failureSummary) }))))`
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: axe: %v", name, err)
	}
	var violations []map[string]any
	json.Unmarshal([]byte(out), &violations)
	if len(violations) > 0 {
		pretty, _ := json.MarshalIndent(violations, "", "  ")
		t.Errorf("%s: accessibility violations:\n%s", name, pretty)
	}
}

// screenshot saves the page as it stands under name, in a temporary
// directory or, with TALLY_SCREENSHOTS=docs, in docs/screenshots.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("%s: screenshot: %v", name, err)
	}
	dir := filepath.Join(os.TempDir(), "tally-screenshots")
	if os.Getenv("TALLY_SCREENSHOTS") == "docs" {
		dir = filepath.Join("..", "docs", "screenshots")
	}
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sized opens a browser at a size.
func sized(t *testing.T, w, h int64) context.Context {
	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, h)); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// TestBrowserVoterView: a voter taps, sees "your vote", keeps keyboard
// focus through live updates, and sees the poll close and its certified
// winner; a scheduled poll waits with its buttons explaining why.
func TestBrowserVoterView(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	axe := axeScript(t)
	for _, size := range sizes {
		t.Run(size.name, func(t *testing.T) {
			ctx := sized(t, size.w, size.h)
			tn := startNode(t, t.TempDir(), nil)
			tn.createPoll(t, "p")
			err := chromedp.Do(ctx,
				chromedp.Navigate(tn.url+"/#/poll/p"),
				chromedp.WaitVisible(`button[data-option="a"]`),
				until(`document.querySelector("#conn").textContent.includes("WebSocket")`),
				until(`document.querySelector("#hint").textContent.length > 0`))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(must(t, ctx, `document.body.innerText`), "Host") {
				t.Fatal("the voters' page shows the Host link")
			}
			checkView(t, ctx, axe, "voter-before-"+size.name)
			if err := chromedp.Do(ctx, chromedp.Click(`button[data-option="b"]`),
				until(`document.querySelector('button[data-option="b"] .count').textContent === "1 vote"`),
				until(`document.querySelector("#hint").textContent.includes("B")`),
				until(`document.querySelector('button[data-option="b"]').getAttribute("aria-pressed") === "true"`)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return tn.totals(t, "p")["b"] == 1 })
			// The tap went on the live socket the page holds, not over HTTP.
			if n := metricValue(t, []*testNode{tn}, "tally_http_requests_total", `route="POST /v1/polls/{poll}/votes"`); n != 0 {
				t.Fatalf("the page sent its vote over HTTP (%v requests) with its socket open", n)
			}
			// The token's puzzle was solved in a Worker started from the
			// client module: /client.js fetched by the page and by the Worker.
			if n := metricValue(t, []*testNode{tn}, "tally_http_requests_total", `code="200",route="GET /client.js"`); n < 2 {
				t.Fatalf("/client.js fetched %v times: the puzzle did not run in a Worker", n)
			}
			// The tap reached the server under the token's voter.
			for r, err := range tn.ledger.Scan("p") {
				if err != nil || len(r.Voter) != 32 {
					t.Fatalf("the page voted as %q (%v), not as its token's voter", r.Voter, err)
				}
			}

			// Keyboard focus on "c" stays there while votes stream in.
			if err := chromedp.Do(ctx, void(chromedp.Evaluate[bool](`document.querySelector('button[data-option="c"]').focus(), true`))); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				tn.castVote(t, "p", "a", fmt.Sprint("kb", i), fmt.Sprint("kb", i))
				if err := chromedp.Do(ctx, until(fmt.Sprintf(`document.querySelector('button[data-option="a"] .count').textContent === "%s"`, map[bool]string{true: "1 vote", false: fmt.Sprint(i+1, " votes")}[i == 0]))); err != nil {
					t.Fatal(err)
				}
			}
			if got := must(t, ctx, `document.activeElement && document.activeElement.dataset.option || "none"`); got != "c" {
				t.Fatalf("keyboard focus moved to %q during live updates", got)
			}
			if got := must(t, ctx, `document.querySelector("#total").textContent`); got != "4 votes" {
				t.Fatalf("total %q", got)
			}
			if got := must(t, ctx, `document.querySelector('button[data-option="a"] .pct').textContent`); got != "75%" {
				t.Fatalf("a's share %q", got)
			}
			checkView(t, ctx, axe, "voter-after-"+size.name)

			// Close: buttons off, then the certified winner with its digest.
			tn.clock.advance(time.Second)
			tn.admin(t, "POST", "/v1/polls/p/close", "")
			tn.closeTakesEffect(t, "p")
			if err := chromedp.Do(ctx, until(`document.querySelector(".badge").textContent === "Closed" && document.querySelector('button[data-option="a"]').disabled`)); err != nil {
				t.Fatal(err)
			}
			checkView(t, ctx, axe, "voter-closed-"+size.name)
			tn.clock.advance(10 * time.Second)
			waitFor(t, func() bool { c, ok := tn.state.Defs.Certificate("p"); return ok && c.Status == state.Reconciled })
			if err := chromedp.Do(ctx, until(`document.querySelector(".winner") && document.querySelector(".winner").textContent === "Winner: A" && !!document.querySelector(".digest code")`)); err != nil {
				t.Fatal(err)
			}
			if got := must(t, ctx, `document.querySelector(".events").textContent`); got != "" {
				t.Fatalf("a stale event under the final result: %q", got)
			}
			checkView(t, ctx, axe, "voter-final-"+size.name)

			// A scheduled poll.
			r := tn.admin(t, "POST", "/v1/polls", fmt.Sprintf(`{"id":"later","question":"Who wins tonight?","options":[{"id":"x","label":"Xi"},{"id":"y","label":"Yara"}],"opens_at":%d,"duration_s":60}`,
				tn.clock.now().Add(90*time.Minute).UnixMilli()))
			if r.status != http.StatusCreated {
				t.Fatalf("scheduled poll: %d %s", r.status, r.raw)
			}
			if err := chromedp.Do(ctx, chromedp.Navigate(tn.url+"/#/poll/later"), chromedp.WaitVisible(`button[data-option="x"]`),
				until(`document.querySelector(".badge").textContent === "Starts soon" && document.querySelector('button[data-option="x"]').disabled`),
				// One countdown on the screen, not two.
				until(`document.querySelector(".countdown").textContent.startsWith("Opens in 1:30:00") || document.querySelector(".countdown").textContent.startsWith("Opens in 1:29:5")`),
				until(`document.querySelector("#hint").textContent === "The buttons wake up when voting opens."`)); err != nil {
				t.Fatal(fmt.Errorf("%w: hint %q", err, must(t, ctx, `document.querySelector("#hint").textContent`)))
			}
			checkView(t, ctx, axe, "voter-scheduled-"+size.name)
		})
	}
}

// must evaluates js to a string.
func must(t *testing.T, ctx context.Context, js string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestBrowserBroadcastViews: the presenter screen with its QR code, the
// overlay (transparent, no scrollbars, filtered options) and the embed in
// an iframe of another origin, which votes like the page.
func TestBrowserBroadcastViews(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	axe := axeScript(t)
	for _, size := range sizes {
		t.Run(size.name, func(t *testing.T) {
			ctx := sized(t, size.w, size.h)
			tn := startNode(t, t.TempDir(), func(c *Config) { c.Origins = []string{"127.0.0.1:*"} })
			tn.createPoll(t, "p")
			for i, o := range []string{"a", "a", "b"} {
				tn.castVote(t, "p", o, fmt.Sprint("v", i), fmt.Sprint("v", i))
			}
			err := chromedp.Do(ctx, chromedp.Navigate(tn.url+"/present/p"),
				until(`document.querySelector("#total") && document.querySelector("#total").textContent === "3 votes"`),
				until(`document.querySelector(".qr img").complete && document.querySelector(".qr img").naturalWidth === 512`))
			if err != nil {
				t.Fatal(err)
			}
			checkView(t, ctx, axe, "present-"+size.name)

			err = chromedp.Do(ctx, chromedp.Navigate(tn.url+"/overlay/p?theme=dark&options=a,b"),
				until(`document.querySelectorAll(".option").length === 2 && document.querySelector('[data-option="a"] .pct').textContent === "67%"`))
			if err != nil {
				t.Fatal(err)
			}
			if bg := must(t, ctx, `getComputedStyle(document.body).backgroundColor`); bg != "rgba(0, 0, 0, 0)" {
				t.Fatalf("overlay background %q, want transparent", bg)
			}
			if over := must(t, ctx, `String(document.documentElement.scrollHeight > innerHeight || document.documentElement.scrollWidth > innerWidth)`); over != "false" {
				t.Fatal("the overlay scrolls")
			}
			if n := must(t, ctx, `String(document.querySelectorAll("button, a, input").length)`); n != "0" {
				t.Fatalf("the overlay has %s interactive elements", n)
			}
			checkView(t, ctx, axe, "overlay-"+size.name)

			// The embed, inside a page of another origin.
			site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, `<!doctype html><html lang="en"><head><title>Broadcaster</title></head><body><main><h1>Tonight's show</h1>
<iframe title="Vote" src="%s/embed/p" width="380" height="560" style="border:1px solid #767676"></iframe></main></body></html>`, tn.url)
			}))
			defer site.Close()
			// The views before have closed their streams: wait until the
			// node counts them gone (at most once a second), so the embed's
			// viewer is not hidden by the overlay's leaving.
			if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return tn.state.Audience.Count("p", tn.clock.now().UnixMilli()) == 0 })
			before := tn.state.Audience.Count("p", tn.clock.now().UnixMilli())
			if err := chromedp.Do(ctx, chromedp.Navigate(site.URL), chromedp.WaitVisible(`iframe`)); err != nil {
				t.Fatal(err)
			}
			// The embed connected (one more viewer) and its own origin's
			// voting works from inside the frame.
			waitFor(t, func() bool { return tn.state.Audience.Count("p", tn.clock.now().UnixMilli()) > before })
			frame, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("iframe").src`))
			if err != nil || !strings.HasSuffix(frame, "/embed/p") {
				t.Fatalf("iframe src %q %v", frame, err)
			}
			checkView(t, ctx, axe, "embed-"+size.name)
		})
	}
}

// TestBrowserHostView: the host creates a hidden poll of an event, sees its
// counts while viewers do not, reveals it, extends it, and closes it after
// confirming.
func TestBrowserHostView(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	axe := axeScript(t)
	ctx := sized(t, 1280, 800)
	tn := startNode(t, t.TempDir(), nil)
	err := chromedp.Do(ctx,
		chromedp.Navigate(tn.url+"/#/host"),
		chromedp.WaitVisible(`#token`),
		chromedp.SendKeys(`#token`, testToken),
		chromedp.SendKeys(`#question`, "Best snack?"),
		chromedp.SendKeys(`#options`, "=HYPERLINK(\"http://evil\")\nNachos\n"),
		chromedp.SendKeys(`#event`, "quiz-night"),
		chromedp.Click(`#hidden`),
		chromedp.Click(`button[type="submit"]`),
		until(`location.hash.startsWith("#/host/") && !!document.querySelector('[data-option="o2"]')`),
		until(`!document.querySelector("#reveal").hidden`),
	)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimPrefix(must(t, ctx, `decodeURIComponent(location.hash)`), "#/host/")
	tn.castVote(t, id, "o2", "viewer-1", "k1")
	if err := chromedp.Do(ctx, until(`document.querySelector('[data-option="o2"] .count').textContent === "1 vote"`)); err != nil {
		t.Fatal(err)
	}
	if r := tn.call(t, "GET", "/v1/polls/"+id, ""); r.body["total"] != nil {
		t.Fatalf("viewers see the hidden counts: %s", r.raw)
	}
	checkView(t, ctx, axe, "host-hidden")

	// The CSV export defuses the formula in the first label.
	csv := must(t, ctx, `tallyPage.toCSV(tallyPage.view.stream.state, {o1: 0, o2: 1}, 1)`)
	if !strings.Contains(csv, `"'=HYPERLINK(""http://evil"")"`) {
		t.Fatalf("CSV does not defuse a formula:\n%s", csv)
	}

	before := tn.admin(t, "GET", "/v1/polls/"+id, "").body["closes_at"].(float64)
	if err := chromedp.Do(ctx, chromedp.Click(`#reveal`), until(`document.querySelector("#reveal").hidden`),
		chromedp.Click(`button[data-extend="60"]`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		return tn.admin(t, "GET", "/v1/polls/"+id, "").body["closes_at"].(float64) == before+60_000
	})
	if r := tn.call(t, "GET", "/v1/polls/"+id, ""); r.body["total"] != 1.0 {
		t.Fatalf("revealed poll: %s", r.raw)
	}
	// Close asks first; Cancel keeps it open.
	tn.clock.advance(time.Second)
	if err := chromedp.Do(ctx, chromedp.Click(`#close`), until(`!document.querySelector(".confirm").hidden`)); err != nil {
		t.Fatal(err)
	}
	checkView(t, ctx, axe, "host-confirm-close")
	if s := tn.call(t, "GET", "/v1/polls/"+id, "").body["status"]; s != "open" {
		t.Fatalf("closed before the confirmation: %v", s)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#confirm-close`)); err != nil {
		t.Fatal(err)
	}
	tn.closeTakesEffect(t, id)
	if err := chromedp.Do(ctx, until(`document.querySelector(".badge").textContent === "Closed"`)); err != nil {
		t.Fatal(err)
	}
	if s := tn.call(t, "GET", "/v1/polls/"+id, "").body["status"]; s != "closed" {
		t.Fatalf("status after the confirmed close: %v", s)
	}
}

// TestBrowserSpeaksSpanish: a browser whose language is Spanish gets the
// interface's words from the Spanish table.
func TestBrowserSpeaksSpanish(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	ctx := browser(t, chromedp.Flag("lang", "es-ES"), chromedp.Flag("accept-lang", "es-ES,es"))
	tn := startNode(t, t.TempDir(), nil)
	tn.createPoll(t, "p")
	tn.castVote(t, "p", "a", "v1", "k1")
	err := chromedp.Do(ctx, chromedp.Navigate(tn.url+"/#/poll/p"), chromedp.WaitVisible(`button[data-option="a"]`),
		until(`document.querySelector("#hint").textContent === "Toca una opción para votar." && document.querySelector("#total").textContent === "1 voto"`),
		until(`document.documentElement.lang === "es" && document.querySelector(".badge").textContent === "En directo"`))
	if err != nil {
		t.Fatalf("%v: hint %q", err, must(t, ctx, `document.querySelector("#hint").textContent + " | " + navigator.language`))
	}
}

// TestBrowserRetriesAPacedToken: a phone behind an address whose node has
// just vouched a token (the pace: one every five seconds, so the tap
// comes within it even on a loaded machine) is answered 429 with
// Retry-After; the page asks again and the vote counts under its token.
func TestBrowserRetriesAPacedToken(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	ctx := browser(t)
	tn := startNode(t, t.TempDir(), func(c *Config) { c.RequireSession, c.PowBits, c.VouchPace = true, NoPuzzle, 0.2 })
	tn.createPoll(t, "p")
	// The page loads (and earns its early token); its token is then
	// dropped, so the tap must earn one, and a neighbour on the same
	// address takes this second's vouched token just before the tap.
	if err := chromedp.Do(ctx, chromedp.Navigate(tn.url+"/#/poll/p"), chromedp.WaitVisible(`button[data-option="a"]`),
		until(`!!tallyPage.client.token`),
		void(chromedp.Evaluate[bool](`tallyPage.client.token = null, localStorage.removeItem("tally.session"), true`))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { // the page's own token may hold this second
		return tn.call(t, "POST", "/v1/session", "", "User-Agent", "neighbour").status == http.StatusOK
	})
	if err := chromedp.Do(ctx, chromedp.Click(`button[data-option="b"]`),
		until(`document.querySelector('button[data-option="b"] .count').textContent === "1 vote"`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return tn.totals(t, "p")["b"] == 1 })
	if got := counterValue(t, tn, "tally_sessions_total", "rate_limited"); got < 1 {
		t.Fatalf("the page's token was not paced (rate_limited %v): the test proves nothing", got)
	}
	for r, err := range tn.ledger.Scan("p") {
		if err != nil || len(r.Voter) != 32 {
			t.Fatalf("the page voted as %q (%v), not as its token's voter", r.Voter, err)
		}
	}
}

// TestBrowserVotesOverHTTPWithoutASocket: a browser without WebSocket
// follows the poll over Server-Sent Events and sends its votes over HTTP
// (the page's fallback), in one batch request.
func TestBrowserVotesOverHTTPWithoutASocket(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	ctx := browser(t)
	tn := startNode(t, t.TempDir(), nil)
	tn.createPoll(t, "p")
	noSocket := func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: "window.WebSocket = undefined;"})
		return chromedp.Void{}, err
	}
	if err := chromedp.Do(ctx, noSocket, chromedp.Navigate(tn.url+"/#/poll/p"), chromedp.WaitVisible(`button[data-option="a"]`),
		until(`document.querySelector("#conn").textContent.includes("Server-Sent Events")`),
		chromedp.Click(`button[data-option="b"]`),
		until(`document.querySelector('button[data-option="b"] .count').textContent === "1 vote"`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return tn.totals(t, "p")["b"] == 1 })
	if n := metricValue(t, []*testNode{tn}, "tally_http_requests_total", `code="200",route="POST /v1/polls/{poll}/votes"`); n != 1 {
		t.Fatalf("%v vote requests over HTTP, want 1", n)
	}
}
