package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/skip2/go-qrcode"

	"tally/ids"
)

// studioQuiz has what a quiz show puts on screen: a long question, a
// 60-character unbroken label, right-to-left text, and a question the
// host never gets to.
var studioQuiz = `{"id":"show","title":"Friday Night Quiz","questions":[` +
	`{"text":"` + strings.Repeat("Which of these cities has hosted the Summer Olympic Games more than once since the first modern games? ", 2)[:200] + `",` +
	`"options":[{"id":"a","label":"Paris"},{"id":"b","label":"London"},{"id":"c","label":"` + strings.Repeat("Llanfairpwllgwyngyll", 3) + `"},{"id":"d","label":"Los Angeles"}],"correct":["b"]},` +
	`{"text":"איזו עיר היא בירת ישראל?","options":[{"id":"a","label":"ירושלים"},{"id":"b","label":"تل أبيب"}],"correct":["a"],"points":2000},` +
	`{"text":"Never asked","options":[{"id":"x","label":"X"},{"id":"y","label":"Y"}],"correct":["x"]}]}`

// studioProblems is what the studio screen must never do, measured on
// element boxes: scroll, put its parts past the viewport, let a tile's
// split out of its tile, show shares that do not add to 100.
const studioProblems = `(() => {
  const W = innerWidth, H = innerHeight, out = [], de = document.documentElement;
  if (de.scrollWidth > W + 1 || de.scrollHeight > H + 1) out.push("the page scrolls: " + de.scrollWidth + "x" + de.scrollHeight);
  const inside = (r, b) => r.left >= b.left - 1 && r.right <= b.right + 1 && r.top >= b.top - 1 && r.bottom <= b.bottom + 1;
  for (const e of document.querySelectorAll(".stage h1, .stage .status, .tile, .clock, .answers, .time-up, .summary, .qr, .qr img, .qr .url, .join-code, .joined, .names li, .standings li, .podium-steps .step, .lower-third")) {
    const r = e.getBoundingClientRect();
    if (r.width && !inside(r, { left: 0, top: 0, right: W, bottom: H })) out.push(e.className + " " + e.tagName + " off screen: " + JSON.stringify([r.left, r.top, r.right, r.bottom].map(Math.round)));
  }
  for (const s of document.querySelectorAll(".tile .split")) if (!inside(s.getBoundingClientRect(), s.closest(".tile").getBoundingClientRect())) out.push("a split leaves its tile");
  const pcts = [...document.querySelectorAll(".tile .split")].map(e => parseInt(e.textContent.replace("✓", ""))).filter(n => !isNaN(n));
  if (pcts.some(n => n > 0) && pcts.reduce((a, b) => a + b, 0) !== 100) out.push("shares add to " + pcts.reduce((a, b) => a + b, 0));
  const plate = document.querySelector(".lower-third");
  if (plate && !plate.hidden) {
    const r = plate.getBoundingClientRect();
    if (r.height > H / 3 + 1) out.push("the plate is " + Math.round(100 * r.height / H) + "% of the frame");
    if (!inside(r, { left: .05 * W, top: .05 * H, right: .95 * W, bottom: .95 * H })) out.push("the plate leaves the title-safe area");
  }
  return JSON.stringify(out);
})()`

// tab opens another tab of ctx's browser at a size.
func tab(t *testing.T, ctx context.Context, w, h int64) context.Context {
	t.Helper()
	c, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(c, chromedp.EmulateViewport(w, h)); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBrowserQuizStudio runs a quiz show as one host does, from the
// keyboard, with the studio screen at 1080p and 720p, its lower third and
// a participant's phone open: lobby (the QR code holds the printed join
// address; the phone counts as joined) → question (tiles in the phone's
// colours, the countdown, answers in) → close → reveal (the split adds to
// 100, the right tile marked) → standings (who moved up) → a second
// question → end (pressed twice) → podium; the question never asked
// stays unseen. Every phase is measured (studioProblems) and checked
// with axe.
func TestBrowserQuizStudio(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	axe := axeScript(t)
	const public = "https://quiz.example.test"
	tn := startNode(t, t.TempDir(), func(c *Config) { c.PublicURL = public })
	if r := tn.admin(t, "POST", "/v1/quizzes", studioQuiz); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	root := browser(t)
	if err := chromedp.Do(root); err != nil { // the browser starts before its tabs
		t.Fatal(err)
	}
	studio, small, overlay := tab(t, root, 1920, 1080), tab(t, root, 1280, 720), tab(t, root, 1920, 1080)
	host, phone := tab(t, root, 1280, 800), tab(t, root, 390, 844)
	screens := map[string]context.Context{"1080p": studio, "720p": small, "overlay": overlay}
	// measure checks every screen in the phase, and runs axe on the
	// 1080p studio screen (saving it as docs' screenshot name).
	measure := func(phase string) {
		t.Helper()
		for name, ctx := range screens {
			var problems []string
			json.Unmarshal([]byte(must(t, ctx, studioProblems)), &problems)
			if len(problems) > 0 {
				t.Errorf("%s, %s: %s", phase, name, strings.Join(problems, "; "))
			}
		}
		checkView(t, studio, axe, "studio-"+phase)
	}
	phaseIs := func(ctx context.Context, p string) chromedp.Action[chromedp.Void] {
		return until(`document.body.dataset.phase === "` + p + `"`)
	}
	for name, ctx := range screens {
		path := "/present/quiz/show"
		if name == "overlay" {
			path = "/overlay/quiz/show"
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(tn.url+path)); err != nil {
			t.Fatal(err)
		}
	}

	// The lobby: the QR code joins the quiz at the public address printed
	// under it; the phone that opens it counts as joined.
	if err := chromedp.Do(studio, phaseIs(studio, "lobby"), until(`document.querySelector(".joined").textContent === "0 joined"`)); err != nil {
		t.Fatal(err)
	}
	printed := must(t, studio, `document.querySelector(".qr .url").textContent`)
	if want := public + "/#/quiz/show"; printed != want {
		t.Fatalf("the lobby prints %q, want %q", printed, want)
	}
	quizQRHolds(t, tn, "show", printed)
	if warn := must(t, studio, `document.querySelector(".qr .warn")?.textContent || ""`); warn != "" {
		t.Errorf("the lobby warns with --public-url set: %q", warn)
	}
	code := must(t, studio, `document.querySelector(".join-code").textContent`)
	if want := ids.JoinCode(ids.JoinQuiz, "show"); code != want {
		t.Fatalf("the lobby's join code is %q, want %q", code, want)
	}
	// The phone types the code on the home page (a wrong one first).
	if err := chromedp.Do(phone, chromedp.Navigate(tn.url+"/"), chromedp.WaitVisible("#join-code"),
		chromedp.SendKeys("#join-code", "zzz zzz\r"), until(`document.querySelector("#join-msg").textContent.startsWith("No poll or quiz has the code ZZZ ZZZ")`),
		void(chromedp.Evaluate[bool](`document.querySelector("#join-code").value = "", true`)), chromedp.SendKeys("#join-code", strings.ToLower(code[:3])+" "+strings.ToLower(code[3:])+"\r"),
		until(`location.hash === "#/quiz/show"`)); err != nil {
		t.Fatal(fmt.Errorf("%w: %q", err, must(t, phone, `location.href + " " + (document.querySelector("#join-msg")?.textContent || "")`)))
	}
	if err := chromedp.Do(phone, until(`!!document.querySelector("#quiz-status")`),
		chromedp.SendKeys("#quiz-name", "Zoë"), until(`tallyPage.view.stream.joinedAt != null`)); err != nil {
		t.Fatal(err)
	}
	tn.clock.advance(time.Second) // a new count alone goes out at most once a second
	if err := chromedp.Do(studio, until(`document.querySelector(".joined").textContent === "1 joined"`)); err != nil {
		t.Fatal(fmt.Errorf("%w: %q", err, must(t, studio, `document.querySelector(".joined").textContent`)))
	}
	if got := must(t, overlay, `String(document.querySelector(".lower-third").hidden)`); got != "true" {
		t.Fatal("the overlay shows a plate in the lobby")
	}
	measure("lobby")

	// The host's page: only the steps that can be taken are on.
	if err := chromedp.Do(host, chromedp.Navigate(tn.url+"/#/"),
		void(chromedp.Evaluate[bool](`sessionStorage.setItem("tally.token", "`+testToken+`"), true`)),
		chromedp.Navigate(tn.url+"/#/host/quiz/show"),
		until(`document.querySelector("#quiz-host-state").textContent === "Ready: 3 questions, none started."`),
		until(`!!document.querySelector(".studio-preview iframe")`)); err != nil {
		t.Fatal(err)
	}
	buttons := func(want string) {
		t.Helper()
		js := `["start","close","reveal","end"].filter(s => !document.querySelector("#quiz-" + s).disabled).join(",")`
		if err := chromedp.Do(host, until(js+` === "`+want+`"`)); err != nil {
			t.Fatalf("buttons on: %q, want %q", must(t, host, js), want)
		}
	}
	buttons("start,end")
	checkView(t, host, axe, "quiz-host-studio")
	key := func(k string) {
		t.Helper()
		if err := chromedp.Do(host, chromedp.KeyEvent(k)); err != nil {
			t.Fatal(err)
		}
	}

	// Question 1: S starts it. The studio shows its tiles in the phones'
	// colours and shapes, the countdown and the answers in.
	key("s")
	for _, ctx := range []context.Context{studio, small} {
		if err := chromedp.Do(ctx, phaseIs(ctx, "question"), until(`document.querySelectorAll(".tile").length === 4`),
			until(`/^(1[0-9]|20)$/.test(document.querySelector(".clock .secs").textContent) && /^(1[0-9]|20) s left$/.test(document.querySelector(".clock .sr-only").textContent)`)); err != nil {
			t.Fatal(err)
		}
	}
	buttons("close,end")
	if err := chromedp.Do(phone, until(`document.querySelectorAll("#q-options .tile").length === 4`),
		until(`!document.querySelector(".countbar").hidden && parseFloat(document.querySelector(".countbar span").style.width) > 50`)); err != nil {
		t.Fatal(err)
	}
	tileLook := `[...document.querySelectorAll(".tile")].map(e => getComputedStyle(e).backgroundColor + e.querySelector(".shape").textContent).join("|")`
	if a, b := must(t, studio, tileLook), must(t, phone, tileLook); a != b {
		t.Errorf("the studio's tiles %q are not the phone's %q", a, b)
	}
	if err := chromedp.Do(overlay, until(`!document.querySelector(".lower-third").hidden && / s left$/.test(document.querySelector(".lower-third .summary").textContent)`)); err != nil {
		t.Fatal(err)
	}
	measure("question")
	tn.clock.advance(2 * time.Second)
	if err := chromedp.Do(phone, chromedp.Click(`button[data-option="b"]`),
		until(`document.querySelector('button[data-option="b"]').getAttribute("aria-pressed") === "true"`),
		until(`document.querySelector("#q-result").textContent.startsWith("Answer sent")`)); err != nil {
		t.Fatal(err)
	}
	// Other participants answer as the admin (past the per-address budget
	// that would filter a crowd from one loopback address).
	answer := func(q, option, voter, name string) {
		t.Helper()
		body := fmt.Sprintf(`{"option":%q,"voter":%q,"idem":%q,"name":%q}`, option, voter, voter+q, name)
		if r := tn.admin(t, "POST", "/v1/polls/"+q+"/votes", body); r.status != http.StatusOK || !strings.Contains(r.raw, `"accepted"`) {
			t.Fatalf("answer: %d %s", r.status, r.raw)
		} else {
			t.Logf("answer %s: %s", voter, r.raw)
		}
	}
	t.Logf("phone: %s", must(t, phone, `JSON.stringify([tallyPage.client.token, localStorage.getItem("tally.answers"), document.querySelector("#q-result").textContent])`))
	tn.clock.advance(time.Second)
	answer("show-1", "b", "ann", "Ann")
	answer("show-1", "c", "bob", "Bob")
	tn.clock.advance(time.Second)
	if err := chromedp.Do(studio, until(`document.querySelector(".answers").innerText.replace(/\s+/g, " ") === "3 answers in"`)); err != nil {
		r := tn.admin(t, "GET", "/v1/polls/show-1/ledger", "")
		t.Fatal(fmt.Errorf("%w: %q; %s", err, must(t, studio, `document.querySelector(".answers").innerText`), r.raw))
	}

	// C closes it: time is up, nothing of the split shows yet.
	key("c")
	tn.closeTakesEffect(t, "show-1")
	if err := chromedp.Do(studio, phaseIs(studio, "closed"), until(`document.querySelector(".time-up").textContent.includes("Time is up")`)); err != nil {
		t.Fatal(err)
	}
	if n := must(t, studio, `String(document.querySelectorAll(".split").length)`); n != "0" {
		t.Fatalf("the split shows before the reveal: %s", n)
	}
	buttons("start,reveal,end")
	measure("closed")

	// R reveals it: the right tile marked, the split adding to 100; once
	// certified, the standings.
	key("r")
	if err := chromedp.Do(studio, phaseIs(studio, "reveal"), until(`document.querySelector('.tile[data-option="b"]').classList.contains("right")`),
		until(`document.querySelector('.tile[data-option="b"] .split')?.textContent === "✓ 67% · 2"`)); err != nil {
		t.Fatal(fmt.Errorf("%w: %q %q", err, must(t, studio, `document.querySelector('.tile[data-option="b"]').outerHTML`), must(t, studio, `document.body.dataset.phase`)))
	}
	if err := chromedp.Do(overlay, until(`document.querySelector(".lower-third .summary").textContent === "The answer was London."`)); err != nil {
		t.Fatal(fmt.Errorf("%w: %q", err, must(t, overlay, `document.querySelector(".lower-third .summary").textContent`)))
	}
	tn.clock.advance(5 * time.Second) // certification
	if err := chromedp.Do(studio, until(`document.querySelectorAll(".standings li").length === 3`)); err != nil {
		t.Fatal(err)
	}
	if last := must(t, studio, `document.querySelector(".standings li:last-child .who").textContent`); last != "Bob" {
		t.Fatalf("Bob (wrong) should be last: %q", last)
	}
	buttons("start,end")
	measure("standings")

	// N (next) starts question 2, right-to-left; Bob answers it right
	// and moves up.
	key("n")
	if err := chromedp.Do(studio, phaseIs(studio, "question"), until(`document.querySelector(".stage h1").textContent === "איזו עיר היא בירת ישראל?"`)); err != nil {
		t.Fatal(err)
	}
	if dir := must(t, studio, `getComputedStyle(document.querySelector(".stage h1")).direction`); dir != "rtl" {
		t.Errorf("a right-to-left question reads %s", dir)
	}
	answer("show-2", "a", "bob", "Bob")
	answer("show-2", "b", "ann", "Ann")
	tn.clock.advance(time.Second)
	key("c")
	tn.closeTakesEffect(t, "show-2")
	if err := chromedp.Do(studio, phaseIs(studio, "closed")); err != nil {
		t.Fatal(err)
	}
	// The phone's answer after the close is refused, and it says so.
	if err := chromedp.Do(phone, void(chromedp.Evaluate[bool](`tallyPage.view.answer(tallyPage.view.f.question, "a"), true`)),
		until(`document.querySelector("#q-result").textContent.startsWith("Too late")`)); err != nil {
		t.Fatal(fmt.Errorf("%w: %q", err, must(t, phone, `document.querySelector("#q-result").textContent`)))
	}
	// R reveals only once the host page knows the question closed.
	buttons("start,reveal,end")
	key("r")
	tn.clock.advance(5 * time.Second)
	if err := chromedp.Do(studio, phaseIs(studio, "reveal"),
		until(`document.querySelector(".standings li:first-child .who")?.textContent === "Bob"`),
		until(`!!document.querySelector(".standings li:first-child .up") && document.querySelector(".standings li:first-child .up").textContent.trim() === "▲2"`)); err != nil {
		cert, _ := tn.state.Defs.Certificate("show-2")
		t.Fatal(fmt.Errorf("%w: %q; show-2's certificate %q at %d", err, must(t, studio, `document.querySelector(".standings")?.textContent ?? document.querySelector("main").textContent`), cert.Status, tn.clock.ms.Load()))
	}
	measure("moved-up")
	// Zoë's phone: her rank and its change (first after question 1, second now).
	if err := chromedp.Do(phone, until(`document.querySelector("#you").textContent === "You: 950 points, rank 2 of 3. ▼ down 1"`)); err != nil {
		t.Fatal(fmt.Errorf("%w: %q", err, must(t, phone, `document.querySelector("#you").textContent`)))
	}

	// E ends the quiz only when pressed twice; question 3 is skipped and
	// stays unseen on the phone.
	key("e")
	if err := chromedp.Do(host, until(`document.querySelector(".error").textContent.includes("Press E again")`)); err != nil {
		t.Fatal(err)
	}
	if r, v := tn.quiz(t, "GET", "/v1/quizzes/show", false); r.status != 200 || v.Status == "ended" {
		t.Fatalf("one press of E ended the quiz: %s", r.raw)
	}
	key("e")
	tn.clock.advance(5 * time.Second)
	if err := chromedp.Do(studio, phaseIs(studio, "podium"), until(`document.querySelectorAll(".podium-steps .step").length === 3`),
		until(`document.querySelector(".step-1 .who").textContent === "Bob"`)); err != nil {
		t.Fatal(err)
	}
	// Measured once the steps have risen (for a second and a half): on a
	// starved machine the rise may not have started when the phase
	// changed (no animation yet is "every finished" too), so also wait
	// for the steps to stand inside the frame (measure checks it again).
	if err := chromedp.Do(studio, until(`document.getAnimations().every(a => a.playState === "finished") && [...document.querySelectorAll(".podium-steps .step")].every(e => e.getBoundingClientRect().bottom <= innerHeight)`)); err != nil {
		t.Fatal(err)
	}
	buttons("")
	if err := chromedp.Do(phone, until(`document.querySelector("#quiz-status").textContent === "The quiz is over."`)); err != nil {
		t.Fatal(err)
	}
	if text := must(t, phone, `document.body.textContent`); strings.Contains(text, "Never asked") {
		t.Fatal("the phone shows the question never asked")
	}
	if got := must(t, overlay, `String(document.querySelector(".lower-third").hidden)`); got != "true" {
		t.Error("the overlay keeps a plate after the end")
	}
	measure("podium")
}

// quizQRHolds checks the quiz's QR code encodes url.
func quizQRHolds(t *testing.T, tn *testNode, quiz, url string) {
	t.Helper()
	res, err := http.Get(tn.url + "/v1/quizzes/" + quiz + "/qr.png?size=512")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got, _ := io.ReadAll(res.Body)
	want, err := qrcode.Encode(url, qrcode.Medium, 512)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the quiz's QR code does not encode the printed %q", url)
	}
}
