package node

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserClientOnAnotherSite runs the ten-line example of docs/clients.md — read
// from that file itself — on a page of another origin: it imports the
// client from the node (/client.js, CORS for the --origins sites) and
// draws the live bars from the node's stream, which follow a new vote.
func TestBrowserClientOnAnotherSite(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	readme, err := os.ReadFile("../docs/clients.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```html\n<div id=\"bars\">")
	snippet, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 || !strings.Contains(snippet, "https://tally.example/client.js") {
		t.Fatal("docs/clients.md has no bar-chart example importing https://tally.example/client.js")
	}
	ctx := sized(t, 1280, 800)
	tn := startNode(t, t.TempDir(), func(c *Config) { c.Origins = []string{"127.0.0.1:*"} })
	if r := tn.admin(t, "POST", "/v1/polls", `{"id":"final","question":"Who wins?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":600}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	tn.castVote(t, "final", "a", "v1", "k1")
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><title>Broadcaster</title></head><body><div id="bars">%s</body></html>`,
			strings.ReplaceAll(snippet, "https://tally.example", tn.url))
	}))
	defer site.Close()
	bars := `document.querySelector("#bars").textContent`
	if err := chromedp.Do(ctx, chromedp.Navigate(site.URL),
		until(bars+`.includes("a") && `+bars+`.includes(" 1")`)); err != nil {
		t.Fatalf("%v: bars %q", err, must(t, ctx, bars))
	}
	tn.castVote(t, "final", "b", "v2", "k2")
	tn.castVote(t, "final", "b", "v3", "k3")
	if err := chromedp.Do(ctx, until(`[...document.querySelectorAll("#bars div")].map(d => d.textContent.trim()).join("|") === "a  1|b  2"`)); err != nil {
		t.Fatalf("%v: bars %q", err, must(t, ctx, `[...document.querySelectorAll("#bars div")].map(d => d.textContent.trim()).join("|")`))
	}
}
