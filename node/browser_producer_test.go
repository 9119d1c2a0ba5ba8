package node

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tally/ids"
	"tally/state"
)

// TestBrowserProducerWorkflow is a show run from one overlay address: the
// event's overlay follows its current poll in the language and colours
// of the address, a hidden poll's plate says when results come, a
// scheduled one counts down, the presenter marks the certified winner and
// stops inviting votes, and an embed tells its parent page its height.
func TestBrowserProducerWorkflow(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	ctx := sized(t, 1280, 720)
	tn := startNode(t, t.TempDir(), func(c *Config) { c.Origins = []string{"127.0.0.1:*"} })
	create := func(spec string) {
		t.Helper()
		if r := tn.admin(t, "POST", "/v1/polls", spec); r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.raw)
		}
	}
	create(`{"id":"e1","event":"show","question":"First question?","options":[{"id":"a","label":"Yes"},{"id":"b","label":"No"}],"duration_s":600,"grace_s":1}`)
	tn.castVote(t, "e1", "a", "v1", "k1")
	text := func(sel string) string { return `(document.querySelector("` + sel + `")?.textContent || "")` }
	logo := url.QueryEscape("/v1/polls/e1/qr.png?size=128") // any image of the site stands in for a logo
	if err := chromedp.Do(ctx, chromedp.Navigate(tn.url+"/overlay/event/show?lang=es&accent=ff8800&logo="+logo),
		until(text(".question")+`.startsWith("First question?")`),
		until(`document.documentElement.lang === "es" && `+text(".badge")+` === "En directo"`),
		until(`getComputedStyle(document.documentElement).getPropertyValue("--bar").trim() === "#ff8800"`),
		// The logo: loaded, top right, inside the title-safe area.
		until(`(() => { const i = document.querySelector("img.logo"); if (!i || !i.complete || !i.naturalWidth) return false;
			const r = i.getBoundingClientRect(); return r.top >= .05 * innerHeight - 1 && r.right <= .95 * innerWidth + 1 && r.bottom <= innerHeight / 2; })()`)); err != nil {
		t.Fatalf("%v: %q", err, must(t, ctx, text("main")))
	}
	// A logo that is no https address or path of the site is ignored.
	for _, bad := range []string{"javascript:alert(1)", "data:image/png;base64,AAAA", "http://evil.example/x.png"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(tn.url+"/overlay/e1?logo="+url.QueryEscape(bad)), until(text(".question")+`.startsWith("First question?")`)); err != nil {
			t.Fatal(err)
		}
		if n := must(t, ctx, `String(document.querySelectorAll("img.logo").length)`); n != "0" {
			t.Errorf("?logo=%s made a logo", bad)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(tn.url+"/overlay/event/show?lang=es&accent=ff8800"), until(text(".question")+`.startsWith("First question?")`)); err != nil {
		t.Fatal(err)
	}

	// The next question of the show: the same overlay moves to it.
	tn.admin(t, "POST", "/v1/polls/e1/close", "")
	tn.clock.advance(time.Second)
	create(`{"id":"e2","event":"show","question":"Second question?","options":[{"id":"a","label":"Red"},{"id":"b","label":"Blue"}],"duration_s":600,"grace_s":1,"hidden":true}`)
	tn.castVote(t, "e2", "b", "v2", "k2")
	if err := chromedp.Do(ctx, until(text(".question")+`.startsWith("Second question?")`),
		until(text(".summary")+` === "Resultados tras la revelación"`),
		until(`getComputedStyle(document.querySelector(".option .track")).display === "none"`)); err != nil {
		t.Fatalf("%v: %q", err, must(t, ctx, text("main")))
	}

	// The event's presenter prints the event's join code, which leads to
	// its current poll.
	if err := chromedp.Do(ctx, chromedp.Navigate(tn.url+"/present/event/show"), until(text("main h1")+`.startsWith("Second question?")`)); err != nil {
		t.Fatal(err)
	}
	code := must(t, ctx, text(".qr .join-code"))
	if code != ids.JoinCode(ids.JoinEvent, "show") {
		t.Errorf("the event presenter's code %q is not the event's %q", code, ids.JoinCode(ids.JoinEvent, "show"))
	}
	if r := tn.call(t, "GET", "/v1/join/"+code, ""); r.body["poll"] != "e2" {
		t.Errorf("the event's code leads to %s, want e2", r.raw)
	}

	// A scheduled poll counts down on its plate.
	create(fmt.Sprintf(`{"id":"later","question":"Later?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"opens_at":%d,"duration_s":60}`,
		tn.clock.now().Add(5*time.Minute).UnixMilli()))
	if err := chromedp.Do(ctx, chromedp.Navigate(tn.url+"/overlay/later"), until(text(".summary")+`.startsWith("Opens in")`)); err != nil {
		t.Fatalf("%v: %q", err, must(t, ctx, text("main")))
	}

	// The reveal on the presenter: the certified winner marked, no more "Scan to vote".
	tn.admin(t, "POST", "/v1/polls/e2/reveal", "")
	tn.admin(t, "POST", "/v1/polls/e2/close", "")
	tn.clock.advance(10 * time.Second)
	waitFor(t, func() bool { c, ok := tn.state.Defs.Certificate("e2"); return ok && c.Status == state.Reconciled })
	if err := chromedp.Do(ctx, chromedp.Navigate(tn.url+"/present/e2"),
		until(text(".certified")+` === "✓ Certified" && document.querySelector(".option.lead .label")?.textContent === "Blue"`),
		until(text(".qr .scan")+` === "Voting has closed" && document.querySelectorAll(".option.lead").length === 1`)); err != nil {
		t.Fatalf("%v: %q", err, must(t, ctx, text("main")))
	}

	// The embed tells the page around it how tall it is.
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><title>Show</title><script>
window.heights = []; addEventListener("message", ev => { if (ev.data && ev.data.type === "tally:resize") heights.push(ev.data.height); });
</script></head><body><iframe title="Vote" src="%s/embed/e1" width="380" height="200"></iframe></body></html>`, tn.url)
	}))
	defer site.Close()
	if err := chromedp.Do(ctx, chromedp.Navigate(site.URL), until(`heights.length > 0 && heights[heights.length - 1] > 200`)); err != nil {
		t.Fatalf("%v: heights %s", err, must(t, ctx, `JSON.stringify(window.heights)`))
	}
}
