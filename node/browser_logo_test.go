package node

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserLogoFromListedHostsOnly: ?logo= shows an image from a host
// of --logo-hosts (or this node's own site), and from any other host
// nothing: the page ignores it, and the page's Content-Security-Policy
// keeps even a script's image from it from being fetched. Both names lead
// to one HTTPS server here, which counts the requests each one gets.
func TestBrowserLogoFromListedHostsOnly(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a browser")
	}
	var logo bytes.Buffer
	png.Encode(&logo, image.NewRGBA(image.Rect(0, 0, 24, 16)))
	var mu sync.Mutex
	asked := map[string]int{}
	site := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		if host == "" {
			host = r.Host
		}
		mu.Lock()
		asked[host]++
		mu.Unlock()
		w.Header().Set("Content-Type", "image/png")
		w.Write(logo.Bytes())
	}))
	defer site.Close()
	count := func(host string) int { mu.Lock(); defer mu.Unlock(); return asked[host] }
	_, port, _ := net.SplitHostPort(site.Listener.Addr().String())
	ctx := browser(t, chromedp.Flag("host-resolver-rules", fmt.Sprintf("MAP logo.example 127.0.0.1:%s, MAP other.example 127.0.0.1:%s", port, port)),
		chromedp.Flag("ignore-certificate-errors", true))
	tn := startNode(t, t.TempDir(), func(c *Config) { c.LogoHosts = []string{"logo.example"} })
	tn.createPoll(t, "p")

	view := func(logo string) string { return tn.url + "/present/p?logo=" + url.QueryEscape(logo) }
	shown := `document.querySelector("img.logo") && document.querySelector("img.logo").complete && document.querySelector("img.logo").naturalWidth === 24`
	if err := chromedp.Do(ctx, chromedp.Navigate(view("https://logo.example/brand.png")), until(shown),
		until(`document.querySelector(".qr img").complete && document.querySelector(".qr img").naturalWidth === 512`)); err != nil {
		t.Fatal(fmt.Errorf("%w: %s; asked %v", err, must(t, ctx, `String(document.querySelector("img.logo")?.outerHTML) + " " + document.querySelector("img.logo")?.complete + " " + document.querySelector("img.logo")?.naturalWidth`), asked))
	}
	if n := count("logo.example"); n == 0 {
		t.Fatal("the listed host's logo was never asked for")
	}
	// A path on the node's own site: here its QR code.
	if err := chromedp.Do(ctx, chromedp.Navigate(view("/v1/polls/p/qr.png?size=128")),
		until(`document.querySelector("img.logo") && document.querySelector("img.logo").complete && document.querySelector("img.logo").naturalWidth === 128`)); err != nil {
		t.Fatal(err)
	}

	// Another host: no logo on the page, and not a request for it, even
	// from a script (the CSP refuses it: a securitypolicyviolation).
	for _, other := range []string{"https://other.example/brand.png", "http://logo.example/brand.png", "https://logo.example:8443/brand.png"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(view(other)),
			until(`document.querySelector("#total") && document.querySelector(".qr img").complete`)); err != nil {
			t.Fatal(err)
		}
		if got := must(t, ctx, `String(document.querySelectorAll("img.logo").length)`); got != "0" {
			t.Fatalf("?logo=%s shown", other)
		}
	}
	load := func(src string) string {
		t.Helper()
		js := `new Promise(done => {
  let violated = "";
  document.addEventListener("securitypolicyviolation", e => { violated = e.violatedDirective + " " + e.blockedURI; });
  const img = new Image();
  img.onload = () => done("loaded");
  img.onerror = () => setTimeout(() => done("failed " + violated), 100);
  img.src = ` + fmt.Sprintf("%q", src) + `;
})`
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := load("https://other.example/script.png"); got != "failed img-src https://other.example/script.png" {
		t.Fatalf("a script's image from another host: %q", got)
	}
	if got := load("https://logo.example/script.png"); got != "loaded" { // the same server, by its listed name
		t.Fatalf("a script's image from the listed host: %q", got)
	}
	if n := count("other.example"); n != 0 {
		t.Fatalf("other.example was asked %d times", n)
	}
}
