package node

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tally/state"
)

// TestBrowserRevealWhileOpen: a hidden poll revealed while votes still
// arrive shows every option's count at once on every view — voter,
// presenter, overlay and the host's page — and stays whole through the
// close and certification (issue 25: the leader showed zero after a
// reveal, on air and in the host's CSV).
func TestBrowserRevealWhileOpen(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	ctx := sized(t, 1280, 800)
	tn := startNode(t, t.TempDir(), nil)
	if r := tn.admin(t, "POST", "/v1/polls", `{"id":"h","question":"Who?","options":[{"id":"sam","label":"Sam"},{"id":"alex","label":"Alex"},{"id":"jordan","label":"Jordan"}],"duration_s":600,"grace_s":1,"hidden":true}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	n := 0
	vote := func(opt string, k int) {
		for range k {
			n++
			tn.castVote(t, "h", opt, fmt.Sprintf("v%d", n), fmt.Sprintf("k%d", n))
		}
	}
	vote("sam", 3)
	vote("alex", 5)

	views := map[string]string{"voter": "/#/poll/h", "presenter": "/present/h", "overlay": "/overlay/h", "host": "/#/host/h"}
	tabs := map[string]context.Context{}
	for name, path := range views {
		tab, cancel := chromedp.NewContext(ctx)
		t.Cleanup(cancel)
		steps := []chromedp.Action[chromedp.Void]{chromedp.EmulateViewport(1280, 800)}
		if name == "host" {
			steps = append(steps, chromedp.Navigate(tn.url+"/#/host"), chromedp.WaitVisible(`#token`),
				void(chromedp.Evaluate[any](fmt.Sprintf(`sessionStorage.setItem("tally.token", %q)`, testToken))))
		}
		steps = append(steps, chromedp.Navigate(tn.url+path), until(`document.querySelectorAll('[data-option]').length === 3`))
		if err := chromedp.Do(tab, steps...); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tabs[name] = tab
	}
	// Every view shows exactly these counts (the host's throughout).
	shows := func(when string, sam, alex, jordan int) {
		t.Helper()
		js := fmt.Sprintf(`[["sam",%d],["alex",%d],["jordan",%d]].every(([o, n]) => {
			const c = document.querySelector('[data-option="' + o + '"] .count');
			return c && c.textContent === (n === 1 ? "1 vote" : n + " votes"); })`, sam, alex, jordan)
		for name, tab := range tabs {
			if err := chromedp.Do(tab, until(js)); err != nil {
				got := must(t, tab, `[...document.querySelectorAll('[data-option]')].map(e => e.dataset.option + "=" + (e.querySelector(".count") || {}).textContent).join(" ")`)
				t.Fatalf("%s, %s: %v; shows %s", when, name, err, got)
			}
		}
	}
	vote("jordan", 2)
	waitFor(t, func() bool { return tn.admin(t, "GET", "/v1/polls/h", "").body["total"] == 10.0 })
	if err := chromedp.Do(tabs["host"], until(`document.querySelector('[data-option="jordan"] .count').textContent === "2 votes"`)); err != nil {
		t.Fatalf("the host does not see the hidden counts: %v", err)
	}
	for _, name := range []string{"voter", "presenter", "overlay"} {
		if got := must(t, tabs[name], `[...document.querySelectorAll('[data-option] .count')].map(e => e.textContent).join("")`); got != "" {
			t.Fatalf("%s shows counts of a hidden poll: %q", name, got)
		}
	}

	if r := tn.admin(t, "POST", "/v1/polls/h/reveal", ""); r.status != 200 {
		t.Fatalf("reveal: %d %s", r.status, r.raw)
	}
	shows("after the reveal", 3, 5, 2)
	vote("sam", 1)
	shows("a vote after the reveal", 4, 5, 2)

	tn.clock.advance(602 * time.Second)
	waitFor(t, func() bool { c, ok := tn.state.Defs.Certificate("h"); return ok && c.Status == state.Reconciled })
	shows("certified", 4, 5, 2)
}
