package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserHostPollAsksForTheToken: one poll's host page opened directly,
// in a tab that holds no admin token, asks for it with the same field as
// the host's page and the quiz host page; a wrong token is refused and
// asked for again (the poll stays open); the right one makes Close, once
// confirmed, close the poll; a reload asks no more.
func TestBrowserHostPollAsksForTheToken(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	axe := axeScript(t)
	ctx := sized(t, 1280, 800)
	tn := startNode(t, t.TempDir(), nil)
	tn.createPoll(t, "p")
	if err := chromedp.Do(ctx, chromedp.Navigate(tn.url+"/#/host/p"),
		until(`!!document.querySelector("#close") && document.querySelector("#question").textContent === "Which?"`),
		until(`!!document.querySelector(".host .token-form") && !document.querySelector(".host .token-form").hidden`),
		until(`document.activeElement === document.querySelector("#token") && document.querySelector("#token").value === ""`)); err != nil {
		t.Fatal(err)
	}
	checkView(t, ctx, axe, "host-poll-token")
	if err := chromedp.Do(ctx, chromedp.SendKeys("#token", "wrong\r"),
		until(`!document.querySelector(".token-form").hidden && document.querySelector(".host .error").textContent !== ""`),
		until(`document.activeElement === document.querySelector("#token")`)); err != nil {
		t.Fatal(fmt.Errorf("%w: %q", err, must(t, ctx, `document.querySelector(".host").textContent`)))
	}
	if got := must(t, ctx, `sessionStorage.getItem("tally.token")`); got != "wrong" {
		t.Fatalf("stored token %q, want the one typed", got)
	}
	if s := tn.call(t, "GET", "/v1/polls/p", "").body["status"]; s != "open" {
		t.Fatalf("poll %v after a wrong token", s)
	}
	tn.clock.advance(time.Second)
	if err := chromedp.Do(ctx, void(chromedp.Evaluate[bool](`document.querySelector("#token").value = "", true`)),
		chromedp.SendKeys("#token", testToken+"\r"),
		until(`document.querySelector(".token-form").hidden && document.activeElement === document.querySelector("#close")`),
		chromedp.Click("#close"), until(`!document.querySelector(".confirm").hidden`),
		chromedp.Click("#confirm-close"), until(`document.querySelector(".confirm").hidden`)); err != nil {
		t.Fatal(fmt.Errorf("%w: %q", err, must(t, ctx, `document.querySelector(".host").textContent`)))
	}
	tn.closeTakesEffect(t, "p")
	if err := chromedp.Do(ctx, until(`document.querySelector(".badge").textContent === "Closed"`),
		until(`document.querySelector(".token-form").hidden && document.querySelector(".host .error").textContent === ""`)); err != nil {
		t.Fatal(fmt.Errorf("%w: %q", err, must(t, ctx, `document.querySelector(".host").textContent`)))
	}
	if s := tn.call(t, "GET", "/v1/polls/p", "").body["status"]; s != "closed" {
		t.Fatalf("poll %v after the confirmed close, want closed", s)
	}
	// The token stays in the tab: a reload asks no more.
	if err := chromedp.Do(ctx, chromedp.Reload(),
		until(`!!document.querySelector(".host .token-form") && document.querySelector(".badge").textContent === "Closed"`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the token's check answers
	if hidden := must(t, ctx, `String(document.querySelector(".token-form").hidden)`); hidden != "true" {
		t.Fatal("a reload with the right token asked for it again")
	}
}
