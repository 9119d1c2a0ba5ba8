package node

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the browser's path, skipping the test where there is
// none — except in CI, where .ci/run installs it and its absence is a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed; .ci/run installs Debian's chromium package")
	}
	t.Skip("chromium is not installed (apt-get install chromium); skipping the browser test")
	return ""
}

// TestBrowserVoteAndWatch drives the real page in headless Chromium: it
// votes with a tap, sees another voter's vote arrive over the WebSocket,
// and sees the poll close when the host closes it.
func TestBrowserVoteAndWatch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	ctx := browser(t)
	tn := startNode(t, t.TempDir(), nil)
	tn.createPoll(t, "p")

	countOf := func(option string) string {
		return `document.querySelector('button[data-option="` + option + `"] .count')?.textContent || ""`
	}
	waitText := func(js, want string) chromedp.Action[chromedp.Void] { return until("(" + js + `) === "` + want + `"`) }
	err := chromedp.Do(ctx,
		chromedp.Navigate(tn.url+"/#/poll/p"),
		chromedp.WaitVisible(`button[data-option="a"]`),
		until(`document.querySelector("#conn").textContent.includes("live")`),
		chromedp.Click(`button[data-option="a"]`),
		waitText(countOf("a"), "1"),
	)
	if err != nil {
		t.Fatal(err)
	}
	// The tap reached the server (not only the optimistic display), under
	// the voter of the token the page got by solving the puzzle in its worker.
	waitFor(t, func() bool { return tn.totals(t, "p")["a"] == 1 })
	for r, err := range tn.ledger.Scan("p") {
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Voter) != 32 || strings.Trim(r.Voter, "0123456789abcdef") != "" {
			t.Fatalf("the page voted as %q, not as its token's voter", r.Voter)
		}
	}
	if solved := counterValue(t, tn, "tally_sessions_total", "puzzle_solved"); solved < 1 {
		t.Fatalf("no puzzle solved by the page (%v)", solved)
	}

	// Another voter's vote arrives over the WebSocket.
	result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("b", "bob", "bob-1")), 0)
	result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("b", "carol", "carol-1")), 0)
	if err := chromedp.Do(ctx, waitText(countOf("b"), "2"), waitText(`document.querySelector("#total").textContent`, "3 votes")); err != nil {
		t.Fatal(err)
	}
	screenshot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	// The host closes the poll; the viewer shows it closed and stops taking taps.
	tn.clock.advance(time.Second)
	if r := tn.admin(t, "POST", "/v1/polls/p/close", ""); r.status != 200 {
		t.Fatalf("close: %d %s", r.status, r.raw)
	}
	if err := chromedp.Do(ctx,
		until(`document.querySelector(".badge").textContent === "closed" && document.querySelector('button[data-option="a"]').disabled`)); err != nil {
		t.Fatal(err)
	}
	badge, err := chromedp.Run(ctx, chromedp.Text(".badge"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.EqualFold(badge, "closed") {
		t.Fatalf("badge %q", badge)
	}
	out := filepath.Join(os.TempDir(), "tally-browser-test.png")
	if dir := os.Getenv("TALLY_ARTIFACTS"); dir != "" {
		out = filepath.Join(dir, "tally-browser-test.png")
	}
	if err := os.WriteFile(out, screenshot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", out)
}

// void drops an action's result.
func void[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}

// TestBrowserHostView drives the host view: paste the token, create a poll,
// land on its live view, close it there.
func TestBrowserHostView(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	ctx := browser(t)
	tn := startNode(t, t.TempDir(), nil)
	err := chromedp.Do(ctx,
		chromedp.Navigate(tn.url+"/#/host"),
		chromedp.WaitVisible(`#token`),
		chromedp.SendKeys(`#token`, testToken),
		chromedp.SendKeys(`#question`, "Best snack?"),
		chromedp.SendKeys(`#options`, "Popcorn\nNachos\n"),
		chromedp.Click(`button[type="submit"]`),
		until(`location.hash.startsWith("#/host/") && !!document.querySelector('button[data-option="o2"]')`),
		until(`[...document.querySelectorAll("button.action")].some(b => b.textContent === "Close now")`),
	)
	if err != nil {
		t.Fatal(err)
	}
	tn.clock.advance(time.Second) // the node's clock is the test's: let the poll have been open a moment
	err = chromedp.Do(ctx,
		void(chromedp.Evaluate[bool](`[...document.querySelectorAll("button.action")].find(b => b.textContent === "Close now").click(), true`)),
		until(`document.querySelector(".badge").textContent === "closed"`),
	)
	if err != nil {
		t.Fatal(err)
	}
	r := tn.call(t, "GET", "/v1/polls", "")
	polls := r.body["polls"].([]any)
	if len(polls) != 1 || polls[0].(map[string]any)["question"] != "Best snack?" || polls[0].(map[string]any)["status"] != "closed" {
		t.Fatalf("polls after the host's work: %s", r.raw)
	}
}

// browser starts headless Chromium (with the flags this machine's closed
// network needs) for one test and returns its context.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(420, 820))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// until waits for a JavaScript condition to hold on the page.
func until(js string) chromedp.Action[chromedp.Void] {
	return void(chromedp.Poll[bool](js, chromedp.WithPollingTimeout(20*time.Second)))
}

// counterValue reads a labelled counter from the node's registry.
func counterValue(t *testing.T, tn *testNode, name, label string) float64 {
	t.Helper()
	mfs, err := tn.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
