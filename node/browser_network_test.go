package node

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"tally/api"
)

// network is a reverse proxy in front of a node that stands for the
// phone's network: it tells the node the phone's address in
// X-Forwarded-For (the node trusts loopback), and move changes that
// address and breaks every connection through it, as a phone walking from
// Wi-Fi onto cellular does.
type network struct {
	url   string
	mu    sync.Mutex
	addr  string
	conns map[net.Conn]bool // every connection the browser opened, upgraded ones too
	// lose is how many more vote requests to pass on to the node and then
	// answer 504 outcome_unknown, as an edge whose full node answered too
	// late does; votes are their bodies, as they came.
	lose  int
	votes []string
}

func newNetwork(t *testing.T, node, addr string) *network {
	t.Helper()
	target, err := url.Parse(node)
	if err != nil {
		t.Fatal(err)
	}
	n := &network{addr: addr, conns: map[net.Conn]bool{}}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // the page's own origin, as the node checks a socket's
		n.mu.Lock()
		r.Out.Header.Set("X-Forwarded-For", n.addr)
		n.mu.Unlock()
	}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/votes") {
			proxy.ServeHTTP(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		n.mu.Lock()
		n.votes = append(n.votes, string(b))
		lose := n.lose > 0
		n.lose--
		n.mu.Unlock()
		if !lose {
			proxy.ServeHTTP(w, r)
			return
		}
		proxy.ServeHTTP(httptest.NewRecorder(), r) // the node takes it; the answer is lost
		w.Header().Set("Retry-After", "1")
		api.WriteError(w, r, api.Errorf(http.StatusGatewayTimeout, api.CodeOutcomeUnknown, "the full node did not answer in time: send the same request again"))
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		n.mu.Lock()
		defer n.mu.Unlock()
		switch s {
		case http.StateNew:
			n.conns[c] = true
		case http.StateClosed:
			delete(n.conns, c)
		}
	}
	srv.Start()
	n.url = srv.URL
	t.Cleanup(func() {
		n.move("") // ends the upgraded sockets, which the server does not wait for
		srv.Close()
	})
	return n
}

// move gives the phone a new address and breaks its connections.
func (n *network) move(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.addr = addr
	for c := range n.conns {
		c.Close()
		delete(n.conns, c)
	}
}

// TestBrowserVoteAfterTheNetworkChanges: a phone votes on Wi-Fi, walks
// onto cellular (another address; its socket breaks) and taps another
// option. The node refuses the token it earned on Wi-Fi (session_mismatch);
// the page drops it, earns one from the new network — presenting the
// refused token as "previous", so the new one keeps the voter id — and
// sends the vote again with the same key. The second tap counts with
// nothing asked of the voter, stamped after the first (the page sent the
// first answer's stamp), and replaces it: the tally ends with the second
// option only, not both.
func TestBrowserVoteAfterTheNetworkChanges(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	ctx := browser(t)
	tn := startNode(t, t.TempDir(), func(c *Config) {
		c.RequireSession, c.PowBits, c.TrustedProxies = true, 4, mustCIDRs("127.0.0.1/32")
	})
	tn.createPoll(t, "p")
	phone := newNetwork(t, tn.url, "198.51.100.7")
	if err := chromedp.Do(ctx, chromedp.Navigate(phone.url+"/#/poll/p"), chromedp.WaitVisible(`button[data-option="a"]`),
		until(`document.querySelector("#conn").textContent.includes("WebSocket") && !!tallyPage.client.token`),
		chromedp.Click(`button[data-option="a"]`),
		until(`document.querySelector('button[data-option="a"] .count').textContent === "1 vote" && !!tallyPage.client.stamp("p")`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return tn.totals(t, "p")["a"] == 1 })
	firstVoter := must(t, ctx, `tallyPage.client.token.voter`)
	firstToken := must(t, ctx, `tallyPage.client.token.token`)
	firstStamp := must(t, ctx, `tallyPage.client.stamp("p")`)

	if err := chromedp.Do(ctx, void(chromedp.Evaluate[bool](`window.wifiSocket = tallyPage.view.stream.ws, true`))); err != nil {
		t.Fatal(err)
	}
	phone.move("203.0.113.9")
	if err := chromedp.Do(ctx, until(`tallyPage.view.stream.ws !== wifiSocket && tallyPage.view.stream.ws.readyState === 1`), // a new socket, from the new address
		chromedp.Click(`button[data-option="b"]`),
		until(`document.querySelector('button[data-option="b"] .count').textContent === "1 vote" && tallyPage.client.stamp("p") !== `+strconv.Quote(firstStamp))); err != nil {
		t.Fatalf("%v: the page says %q", err, must(t, ctx, `document.querySelector("p.error").textContent`))
	}
	waitFor(t, func() bool { return tn.totals(t, "p")["b"] == 1 })
	if totals := tn.totals(t, "p"); totals["a"] != 0 || totals["b"] != 1 || totals["_total"] != 1 {
		t.Fatalf("totals %v: want b:1 and a:0, the change of mind counted once", totals)
	}
	if err := chromedp.Do(ctx, until(`document.querySelector('button[data-option="a"] .count').textContent === "0 votes"`)); err != nil {
		t.Fatalf("%v: option a shows %q", err, must(t, ctx, `document.querySelector('button[data-option="a"] .count').textContent`))
	}
	if msg := must(t, ctx, `document.querySelector("p.error").textContent`); msg != "" {
		t.Fatalf("the voter was told %q", msg)
	}
	if hint := must(t, ctx, `document.querySelector("#hint").textContent`); hint != "Your vote: B — tap another to change it." {
		t.Fatalf("hint %q", hint)
	}
	if got := must(t, ctx, `tallyPage.client.token.token`); got == firstToken {
		t.Fatal("the page kept the refused token")
	}
	if got := must(t, ctx, `tallyPage.client.token.voter`); got != firstVoter {
		t.Fatalf("the new token's voter is %s, the refused one's %s: want the same", got, firstVoter)
	}
	if stored := must(t, ctx, `JSON.parse(localStorage.getItem("tally.session")).token`); stored == firstToken {
		t.Fatal("the refused token is still stored")
	}
	if kept := must(t, ctx, `String(localStorage.getItem("tally.previous"))`); kept != "null" {
		t.Fatalf("tally.previous is %q after the new token was issued", kept)
	}
	if got := counterValue(t, tn, "tally_sessions_total", "issued"); got != 2 {
		t.Fatalf("%v tokens issued, want 2: one on Wi-Fi, one on cellular", got)
	}
	if got := counterValue(t, tn, "tally_sessions_total", "reissued"); got != 1 {
		t.Fatalf("%v tokens reissued for a previous voter, want 1: the one on cellular", got)
	}
	// The ledger: the second vote from the same voter, stamped after the
	// first, and each under one key (the refused send took nothing).
	type rec struct {
		voter, option string
		wall          int64
		logical       uint32
	}
	var recs []rec
	for r, err := range tn.ledger.Scan("p") {
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec{r.Voter, r.Option, r.Wall, r.Logical})
	}
	if len(recs) != 2 || recs[0].voter != firstVoter || recs[1].voter != firstVoter || recs[0].option != "a" || recs[1].option != "b" {
		t.Fatalf("ledger %+v", recs)
	}
	if w, l, ok := api.ParseStamp(firstStamp); !ok || w != recs[0].wall || l != recs[0].logical {
		t.Fatalf("the page holds %q for the first vote, ledgered at %d.%d", firstStamp, recs[0].wall, recs[0].logical)
	}
	if recs[1].wall < recs[0].wall || recs[1].wall == recs[0].wall && recs[1].logical <= recs[0].logical {
		t.Fatalf("the second vote (%d.%d) is not stamped after the first (%d.%d)", recs[1].wall, recs[1].logical, recs[0].wall, recs[0].logical)
	}
}

// TestBrowserResolvesAnUnknownOutcome: a phone without WebSocket votes
// over HTTP through an edge that answers its vote 504 outcome_unknown
// (the node took it; the answer was lost). The page sends the same
// request again after Retry-After, gets the definitive answer (a
// duplicate of the ledgered vote), and the tap counts once with nothing
// said to the voter.
func TestBrowserResolvesAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	ctx := browser(t)
	tn := startNode(t, t.TempDir(), func(c *Config) { c.PowBits, c.TrustedProxies = 4, mustCIDRs("127.0.0.1/32") })
	tn.createPoll(t, "p")
	edge := newNetwork(t, tn.url, "198.51.100.7")
	edge.lose = 1
	noSocket := func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: "window.WebSocket = undefined;"})
		return chromedp.Void{}, err
	}
	if err := chromedp.Do(ctx, noSocket, chromedp.Navigate(edge.url+"/#/poll/p"), chromedp.WaitVisible(`button[data-option="a"]`),
		until(`document.querySelector("#conn").textContent.includes("Server-Sent Events") && !!tallyPage.client.token`),
		chromedp.Click(`button[data-option="b"]`),
		until(`!!tallyPage.client.stamp("p")`)); err != nil {
		t.Fatalf("%v: the page says %q", err, must(t, ctx, `document.querySelector("p.error").textContent`))
	}
	waitFor(t, func() bool { return tn.totals(t, "p")["b"] == 1 })
	if msg := must(t, ctx, `document.querySelector("p.error").textContent`); msg != "" {
		t.Fatalf("the voter was told %q", msg)
	}
	edge.mu.Lock()
	votes := edge.votes
	edge.mu.Unlock()
	if len(votes) != 2 || votes[0] != votes[1] {
		t.Fatalf("vote requests %q: want the same one twice", votes)
	}
	n := 0
	for _, err := range tn.ledger.Scan("p") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 || tn.totals(t, "p")["_total"] != 1 {
		t.Fatalf("%d records, totals %v: want the vote once", n, tn.totals(t, "p"))
	}
}
