package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/skip2/go-qrcode"

	"tally/ids"
)

// screenPolls are the realistic contents a broadcast puts on screen: six
// long labels, 32 options, a 300-character question, an unbroken
// 60-character label, right-to-left text, and 44/33/22 (whose rounded
// shares add to 99%).
var screenPolls = []struct {
	id, question string
	labels       []string
	votes        []int
}{
	{"long6", "Who should be named the most valuable player of the season?", []string{
		"The quarterback who threw for the most yards in a single season",
		"A defensive lineman with record sacks and a famous celebration dance",
		"Neither of them, because the kicker deserves the award this year",
		"The head coach who turned the franchise around in two seasons",
		"A rookie receiver whose one-handed catch went viral worldwide",
		"Everyone on the special teams unit who blocked three punts"}, []int{3, 2, 2, 1, 1, 1}},
	{"many", "Pick a number", nil, nil},
	{"q300", strings.Repeat("Thinking about everything you have seen tonight, the performances, the judges and the audience, ", 4)[:300],
		[]string{"Aurora", "Borealis", "Cassiopeia", "Draco"}, []int{44, 33, 22, 0}},
	{"word", "Best hashtag?", []string{"#" + strings.Repeat("Donaudampfschifffahrtsgesellschaft", 2)[:59], "#short"}, []int{2, 1}},
	{"rtl", "מי ינצח הערב?", []string{"הקבוצה הכחולה!", "الفريق الأحمر؟"}, []int{1, 2}},
}

// screenProblems is what a screen must never do, measured on element
// boxes: scroll, put an element past the viewport, let a row's figures
// out of its box; shares that do not add to 100; on the presenter a QR
// code off screen; on the overlay a plate outside the title-safe area or
// over a third of the frame.
const screenProblems = `(() => {
  let W = innerWidth, H = innerHeight, out = [];
  const de = document.documentElement;
  const voter = !document.body.classList.contains("present") && !document.body.classList.contains("overlay");
  if (de.scrollWidth > W + 1 || (!voter && de.scrollHeight > H + 1)) out.push("the page scrolls: " + de.scrollWidth + "x" + de.scrollHeight);
  if (voter) H = Infinity; // the voter's page may scroll down, never sideways
  const inside = (r, b) => r.left >= b.left - 1 && r.right <= b.right + 1 && r.top >= b.top - 1 && r.bottom <= b.bottom + 1;
  const view = { left: 0, top: 0, right: W, bottom: H };
  for (const e of document.querySelectorAll("main h1, .question, .option, .figures, .summary, .qr, .qr img, .qr .url, .lower-third, .winner")) {
    const r = e.getBoundingClientRect();
    if (r.width && !inside(r, view)) out.push(e.className + " " + (e.tagName) + " off screen: " + JSON.stringify([r.left, r.top, r.right, r.bottom].map(Math.round)));
  }
  for (const o of document.querySelectorAll(".option")) {
    const b = o.getBoundingClientRect();
    for (const k of o.querySelectorAll(".figures, .track")) if (!inside(k.getBoundingClientRect(), b)) out.push("a row's " + k.className + " leaves its box");
  }
  const pcts = [...document.querySelectorAll(".option .pct")].map(e => parseInt(e.textContent)).filter(n => !isNaN(n));
  if (pcts.length && pcts.some(n => n > 0) && pcts.reduce((a, b) => a + b, 0) !== 100) out.push("shares add to " + pcts.reduce((a, b) => a + b, 0));
  if (document.body.classList.contains("present") && !document.querySelector(".qr img")) out.push("no QR code");
  const plate = document.querySelector(".lower-third");
  if (plate) {
    const r = plate.getBoundingClientRect();
    if (r.height > H / 3 + 1) out.push("the plate is " + Math.round(100 * r.height / H) + "% of the frame");
    if (!inside(r, { left: .05 * W, top: .05 * H, right: .95 * W, bottom: .95 * H })) out.push("the plate leaves the title-safe area");
  }
  return JSON.stringify(out);
})()`

// TestBrowserScreensFitAnyContent puts each of screenPolls on the
// presenter screen, the overlay and the voter's page at a phone's, a 720p and a 1080p size,
// and measures that nothing overflows (screenProblems); the QR code holds
// the --public-url address printed under it.
func TestBrowserScreensFitAnyContent(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	axe := axeScript(t)
	const public = "https://vote.example.test"
	tn := startNode(t, t.TempDir(), func(c *Config) { c.PublicURL = public })
	for _, p := range screenPolls {
		labels, votes := p.labels, p.votes
		if labels == nil {
			for i := range 32 {
				labels = append(labels, fmt.Sprintf("Option number %d", i+1))
				votes = append(votes, i%3)
			}
		}
		var opts []map[string]string
		for i, l := range labels {
			opts = append(opts, map[string]string{"id": fmt.Sprint("o", i), "label": l})
		}
		spec, _ := json.Marshal(map[string]any{"id": p.id, "question": p.question, "options": opts, "duration_s": 3600})
		if r := tn.admin(t, "POST", "/v1/polls", string(spec)); r.status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", p.id, r.status, r.raw)
		}
		k := 0
		for i, n := range votes {
			for range n {
				tn.castVote(t, p.id, fmt.Sprint("o", i), fmt.Sprint("v", k), fmt.Sprint("k", k))
				k++
			}
		}
	}
	for _, size := range []struct {
		name string
		w, h int64
	}{{"phone", 390, 844}, {"720p", 1280, 720}, {"1080p", 1920, 1080}} {
		t.Run(size.name, func(t *testing.T) {
			ctx := sized(t, size.w, size.h)
			for _, p := range screenPolls {
				for _, view := range []string{"present", "overlay", "#/poll"} {
					if err := chromedp.Do(ctx, chromedp.Navigate(tn.url+"/"+view+"/"+p.id),
						until(`document.querySelectorAll(".option").length > 0 && /[1-9]/.test(document.querySelector(".summary").textContent)`)); err != nil {
						t.Fatalf("%s %s: %v", view, p.id, err)
					}
					var problems []string
					json.Unmarshal([]byte(must(t, ctx, screenProblems)), &problems)
					if len(problems) > 0 {
						t.Errorf("%s/%s at %dx%d: %s", view, p.id, size.w, size.h, strings.Join(problems, "; "))
					}
					if dir := must(t, ctx, `getComputedStyle(document.querySelector(".option .label")).direction`); (p.id == "rtl") != (dir == "rtl") {
						t.Errorf("%s/%s: the label's direction is %s", view, p.id, dir)
					}
					// Right-to-left text starts at the right: the label right of its figures.
					if p.id == "rtl" && must(t, ctx, `String(document.querySelector(".option .label").getBoundingClientRect().left > document.querySelector(".option .figures").getBoundingClientRect().right)`) != "true" {
						t.Errorf("%s/%s: a right-to-left label does not start at the right", view, p.id)
					}
					if view == "present" {
						printed := must(t, ctx, `document.querySelector(".qr .url").textContent`)
						if want := public + "/#/poll/" + p.id; printed != want {
							t.Errorf("%s: the presenter prints %q, want %q", p.id, printed, want)
						}
						qrHolds(t, tn, p.id, printed)
						if code := must(t, ctx, `document.querySelector(".qr .join-code").textContent`); code != ids.JoinCode(ids.JoinPoll, p.id) {
							t.Errorf("%s: the presenter's join code %q is not the node's %q", p.id, code, ids.JoinCode(ids.JoinPoll, p.id))
						}
					}
					if size.name == "1080p" && (p.id == "many" || p.id == "rtl") {
						checkView(t, ctx, axe, strings.TrimPrefix(view, "#/")+"-"+p.id+"-"+size.name)
					}
				}
			}
		})
	}
}

// qrHolds checks the poll's QR code encodes url: the same image as
// url's own code.
func qrHolds(t *testing.T, tn *testNode, poll, url string) {
	t.Helper()
	res, err := http.Get(tn.url + "/v1/polls/" + poll + "/qr.png?size=512")
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
		t.Errorf("%s: the QR code does not encode the printed %q (it says %q)", poll, url, res.Header.Get("X-Tally-Vote-URL"))
	}
}
