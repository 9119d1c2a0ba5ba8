package node

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserQuiz: a participant on a phone waits for the host, sees the
// question with its countdown, answers on the quiz's stream (timed from
// the question's frame), sees "correct" once revealed and their score and
// rank (told on the stream) once certified; the host starts and ends the quiz from the host
// view. Each view is checked with axe.
func TestBrowserQuiz(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	axe := axeScript(t)
	ctx := sized(t, 390, 844)
	tn := startNode(t, t.TempDir(), nil)
	if r := tn.admin(t, "POST", "/v1/quizzes", pubQuiz); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(tn.url+"/#/quiz/pub"),
		until(`document.querySelector("#quiz-status") && document.querySelector("#quiz-status").textContent.includes("Waiting for the host")`)); err != nil {
		t.Fatal(err)
	}
	if got := must(t, ctx, `document.querySelector("h1").textContent`); got != "Pub quiz" {
		t.Fatalf("title %q", got)
	}
	checkView(t, ctx, axe, "quiz-waiting")

	tn.admin(t, "POST", "/v1/quizzes/pub/start", "")
	if err := chromedp.Do(ctx,
		until(`document.querySelector("#q-text").textContent === "2+2?" && !document.querySelector('button[data-option="b"]').disabled`),
		until(`tallyPage.view.stream.ws && tallyPage.view.stream.ws.readyState === WebSocket.OPEN && tallyPage.view.stream.failures === 0`), // the quiz's stream; no polling
		// The countdown runs on the browser's clock from the server's
		// reading (frozen here at the opening): 20 s, less whatever real
		// time the page took.
		until(`/^([1-9]|1[0-9]|20) s left$/.test(document.querySelector("#q-countdown").textContent)`)); err != nil {
		t.Fatal(fmt.Errorf("%w: %q, offset %s", err, must(t, ctx, `document.querySelector("#q-countdown").textContent`), must(t, ctx, `String(tallyPage.view.stream.offset)`)))
	}
	checkView(t, ctx, axe, "quiz-question")
	tn.clock.advance(2 * time.Second)
	if err := chromedp.Do(ctx, chromedp.SendKeys("#quiz-name", "Zoë"), chromedp.Click(`button[data-option="b"]`),
		until(`document.querySelector("#q-result").textContent === "Answer sent: 4, in 2.0 s."`),
		until(`document.querySelector('button[data-option="a"]').disabled`)); err != nil {
		t.Fatal(fmt.Errorf("%w: result %q", err, must(t, ctx, `document.querySelector("#q-result").textContent`)))
	}
	if r := tn.admin(t, "POST", "/v1/polls/pub-1/votes", `{"option":"a","voter":"x","idem":"x"}`); r.status != 200 {
		t.Fatalf("a second participant: %d %s", r.status, r.raw)
	}
	tn.clock.advance(time.Second)
	tn.admin(t, "POST", "/v1/quizzes/pub/close", "")
	tn.closeTakesEffect(t, "pub-1")
	tn.admin(t, "POST", "/v1/quizzes/pub/reveal", "")
	if err := chromedp.Do(ctx, until(`document.querySelector("#q-result").textContent === "Correct! +950 points."`),
		until(`document.querySelector('button[data-option="b"]').classList.contains("correct")`)); err != nil {
		t.Fatal(err)
	}
	tn.clock.advance(5 * time.Second) // certification
	if err := chromedp.Do(ctx, until(`document.querySelector("#you") && document.querySelector("#you").textContent === "You: 950 points, rank 1 of 2."`),
		until(`document.querySelector(".podium li").textContent === "Zoë · 950 points"`)); err != nil {
		t.Fatal(fmt.Errorf("%w: %q", err, must(t, ctx, `document.querySelector("#board").textContent`)))
	}
	checkView(t, ctx, axe, "quiz-revealed")

	// The host view: start the next question, end the quiz.
	host := sized(t, 1280, 800)
	if err := chromedp.Do(host, chromedp.Navigate(tn.url+"/#/"),
		void(chromedp.Evaluate[bool](`sessionStorage.setItem("tally.token", "`+testToken+`"), true`)),
		chromedp.Navigate(tn.url+"/#/host/quiz/pub"),
		until(`document.querySelector("#quiz-host-state").textContent === "Question 1 of 3 is closed."`),
		until(`document.querySelectorAll("#quiz-questions li").length === 3`)); err != nil {
		t.Fatal(err)
	}
	checkView(t, host, axe, "quiz-host")
	if err := chromedp.Do(host, chromedp.Click("#quiz-start"),
		until(`document.querySelector("#quiz-host-state").textContent === "Question 2 of 3 is open."`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, until(`document.querySelector("#q-text").textContent === "Capital of France?"`)); err != nil {
		t.Fatal(err)
	}
	// A participant who joins 5 s into the question first gets the hub's
	// last frame, written at the opening; the page must still set its
	// clock to the server's now (the join's answer carries it), not to
	// that frame's. The server's clock runs with real time meanwhile, so
	// a page 5 s behind stays 5 s behind.
	tn.clock.advance(5 * time.Second)
	stop, ran := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ran)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				tn.clock.advance(10 * time.Millisecond)
			}
		}
	}()
	late := sized(t, 390, 844)
	err := chromedp.Do(late, chromedp.Navigate(tn.url+"/#/quiz/pub"),
		until(`document.querySelector("#q-text") && document.querySelector("#q-text").textContent === "Capital of France?"`),
		until(`tallyPage.view.stream.joinedAt != null && parseInt(document.querySelector("#q-countdown").textContent) <= 15`))
	before := tn.clock.now().UnixMilli()
	pageNow, _ := strconv.ParseInt(must(t, late, `String(tallyPage.view.stream.now())`), 10, 64)
	close(stop)
	<-ran
	if err != nil {
		t.Fatal(fmt.Errorf("%w: %q", err, must(t, late, `document.querySelector("#q-countdown").textContent`)))
	}
	if behind := before - pageNow; behind > 2500 { // the stale frame's clock would be 5 s behind
		t.Fatalf("the late participant's page reads the server's clock %d ms behind", behind)
	}
	tn.clock.advance(time.Second)
	if err := chromedp.Do(host, chromedp.Click("#quiz-end")); err != nil {
		t.Fatal(err)
	}
	tn.closeTakesEffect(t, "pub-2")
	if err := chromedp.Do(host, until(`document.querySelector("#quiz-host-state").textContent === "The quiz is over."`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, until(`document.querySelector("#quiz-status").textContent === "The quiz is over."`)); err != nil {
		t.Fatal(err)
	}
	// Without --public-url the studio screen's code holds its own loopback
	// address, and it says so.
	if r := tn.admin(t, "POST", "/v1/quizzes", strings.Replace(pubQuiz, `"id":"pub"`, `"id":"next"`, 1)); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	if err := chromedp.Do(late, chromedp.Navigate(tn.url+"/present/quiz/next"),
		until(`(document.querySelector(".qr .warn")?.textContent || "").includes("which phones cannot reach")`)); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserQuizHostAsksForTheToken: the quiz host page opened directly,
// in a tab that holds no admin token, asks for it with the poll host
// page's field rather than showing an empty quiz; a wrong token is refused
// and asked for again; the right one loads the questions, and S starts the
// first question.
func TestBrowserQuizHostAsksForTheToken(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	axe := axeScript(t)
	ctx := sized(t, 1280, 800)
	tn := startNode(t, t.TempDir(), nil)
	if r := tn.admin(t, "POST", "/v1/quizzes", pubQuiz); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(tn.url+"/#/host/quiz/pub"),
		until(`!!document.querySelector(".token-form") && !document.querySelector(".token-form").hidden`),
		until(`document.activeElement === document.querySelector("#token")`),
		until(`document.querySelector("#quiz-start").disabled && document.querySelectorAll("#quiz-questions li").length === 0`)); err != nil {
		t.Fatal(err)
	}
	checkView(t, ctx, axe, "quiz-host-token")
	// S in the field is typing, not a step; a wrong token is refused.
	if err := chromedp.Do(ctx, chromedp.SendKeys("#token", "s-wrong\r"),
		until(`!document.querySelector(".token-form").hidden && document.querySelector("#main .error").textContent !== ""`)); err != nil {
		t.Fatal(err)
	}
	if s := tn.admin(t, "GET", "/v1/quizzes/pub", "").body["status"]; s != "ready" {
		t.Fatalf("quiz %v before the token", s)
	}
	if err := chromedp.Do(ctx, void(chromedp.Evaluate[bool](`document.querySelector("#token").value = "", true`)),
		chromedp.SendKeys("#token", testToken+"\r"),
		until(`document.querySelector(".token-form").hidden && document.querySelectorAll("#quiz-questions li").length === 3`),
		until(`document.querySelector("#quiz-host-state").textContent === "Ready: 3 questions, none started." && !document.querySelector("#quiz-start").disabled`),
		chromedp.KeyEvent("s"),
		until(`document.querySelector("#quiz-host-state").textContent === "Question 1 of 3 is open."`)); err != nil {
		t.Fatal(fmt.Errorf("%w: %q", err, must(t, ctx, `document.querySelector("#main").textContent`)))
	}
	if s := tn.admin(t, "GET", "/v1/quizzes/pub", "").body["status"]; s != "question" {
		t.Fatalf("quiz %v after S, want question", s)
	}
	// The token stays in the tab: a reload asks no more.
	if err := chromedp.Do(ctx, chromedp.Reload(),
		until(`!!document.querySelector("#quiz-host-state") && document.querySelector("#quiz-host-state").textContent === "Question 1 of 3 is open."`),
		until(`document.querySelector(".token-form").hidden`)); err != nil {
		t.Fatal(err)
	}
}
