package node

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"tally/receipt"
	"tally/state"
)

// receiptLine reads the page's receipt line and its class, as JSON.
const receiptLine = `JSON.stringify({ text: document.querySelector("#receipt")?.textContent || "",
  class: document.querySelector("#receipt")?.className || "", href: document.querySelector("#receipt a")?.getAttribute("href") || "" })`

// TestBrowserReceipt: a voter votes on the page and changes their mind;
// the page keeps each vote's receipt; the poll is closed and certified
// through the admin API, and the page checks the latest receipt against
// the certified result (the client's verifyReceipt, in the browser):
// "in the certified result ✓" with a link to the proof. The first vote's
// receipt alone says it was replaced by the later vote, which counts; a
// receipt edited in localStorage fails at its signature, in English and
// in Spanish. No step breaks the page's Content-Security-Policy.
func TestBrowserReceipt(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	ctx := browser(t)
	tn := startNode(t, t.TempDir(), nil)
	tn.createPoll(t, "p")
	err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspListener})
		return chromedp.Void{}, err
	},
		chromedp.Navigate(tn.url+"/#/poll/p"),
		chromedp.WaitVisible(`button[data-option="a"]`),
		void(chromedp.Evaluate[bool](`localStorage.setItem("tally.receipt-spread-ms", "0"), true`)), // checked at once, not spread over 30 s
		until(`document.querySelector("#conn").textContent.includes("WebSocket")`),
		chromedp.Click(`button[data-option="a"]`),
		until(`JSON.parse(localStorage.getItem("tally.receipts.p") || "[]").length === 1`),
		chromedp.Click(`button[data-option="b"]`),
		until(`JSON.parse(localStorage.getItem("tally.receipts.p") || "[]").length === 2`))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { tot := tn.totals(t, "p"); return tot["a"] == 0 && tot["b"] == 1 })
	var kept []receipt.Receipt
	if err := json.Unmarshal([]byte(must(t, ctx, `localStorage.getItem("tally.receipts.p")`)), &kept); err != nil {
		t.Fatal(err)
	}
	for _, r := range kept {
		if err := r.Check(); err != nil || r.Poll != "p" {
			t.Fatalf("the page kept %+v: %v", r, err)
		}
	}
	// Nothing to say before the result is certified.
	if line := must(t, ctx, receiptLine); !strings.Contains(line, `"text":""`) {
		t.Fatalf("a receipt line before the close: %s", line)
	}

	// Close and certify.
	tn.clock.advance(time.Second)
	if r := tn.admin(t, "POST", "/v1/polls/p/close", ""); r.status != http.StatusOK {
		t.Fatalf("close: %d %s", r.status, r.raw)
	}
	tn.closeTakesEffect(t, "p")
	tn.clock.advance(10 * time.Second) // past the 5 s grace
	if r := tn.admin(t, "POST", "/v1/polls/p/certify", `{}`); r.status != http.StatusOK {
		t.Logf("certify: %d %s (the node may have certified it by itself)", r.status, r.raw)
	}
	waitFor(t, func() bool { c, ok := tn.state.Defs.Certificate("p"); return ok && c.Status == state.Reconciled })

	// The latest receipt: counted.
	line := waitLine(t, ctx, `"Your vote is in the certified result ✓ · See the proof"`)
	if !strings.Contains(line.Class, "ok") || line.Href != "/v1/polls/p/proofs/"+kept[1].Leaf {
		t.Fatalf("the counted line: %+v", line)
	}
	// The link is the proof: the node's own, for the latest vote.
	r := tn.call(t, "GET", line.Href, "")
	proof, err := receipt.DecodeProof([]byte(r.raw))
	if r.status != http.StatusOK || err != nil || proof.Disposition != receipt.Counted || proof.Vote.Option != "b" {
		t.Fatalf("GET %s: %d %v %s", line.Href, r.status, err, r.raw)
	}

	// The first vote's receipt alone: replaced by the later one, which counts.
	first, _ := json.Marshal(kept[:1])
	setReceipts(t, ctx, string(first))
	line = waitLine(t, ctx, `"Replaced by your later vote for B, which counts ✓ · See the proof"`)
	if !strings.Contains(line.Class, "ok") || line.Href != "/v1/polls/p/proofs/"+kept[0].Leaf {
		t.Fatalf("the superseded line: %+v", line)
	}

	// The latest receipt with its stamp edited: its signature fails.
	edited := kept[1]
	wall, logical, _ := strings.Cut(edited.Stamp, ".")
	n, _ := strconv.ParseUint(logical, 10, 32)
	edited.Stamp = wall + "." + strconv.FormatUint(n+1, 10)
	tampered, _ := json.Marshal([]receipt.Receipt{kept[0], edited})
	setReceipts(t, ctx, string(tampered))
	line = waitLine(t, ctx, `"Your vote could not be checked: the receipt's signature is not the server's."`)
	if !strings.Contains(line.Class, "bad") || line.Href != "" {
		t.Fatalf("the failure line: %+v", line)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(tn.url+"/?lang=es#/poll/p")); err != nil {
		t.Fatal(err)
	}
	waitLine(t, ctx, `"No se pudo comprobar tu voto: la firma del recibo no es la del servidor."`)

	if v := must(t, ctx, takeViolations); v != "[]" {
		t.Fatalf("Content-Security-Policy violations: %s", v)
	}
}

// setReceipts stores the poll's receipts as the page keeps them and
// loads the page again.
func setReceipts(t *testing.T, ctx context.Context, receipts string) {
	t.Helper()
	js := `localStorage.setItem("tally.receipts.p", ` + jsString(receipts) + `), true`
	if err := chromedp.Do(ctx, void(chromedp.Evaluate[bool](js)), chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// waitLine waits until the receipt line says text (a JavaScript string
// literal) and returns it.
func waitLine(t *testing.T, ctx context.Context, text string) struct{ Text, Class, Href string } {
	t.Helper()
	var line struct{ Text, Class, Href string }
	err := chromedp.Do(ctx, until(`document.querySelector("#receipt") && document.querySelector("#receipt").textContent === `+text))
	json.Unmarshal([]byte(must(t, ctx, receiptLine)), &line)
	if err != nil {
		t.Fatalf("the receipt line %s: %v; it says %+v", text, err, line)
	}
	return line
}
