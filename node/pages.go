package node

import (
	"bytes"
	"fmt"
	"html"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"tally/api"
	tallyjs "tally/clients/js"
	"tally/join"
	"tally/qr"
	"tally/state"
	"tally/web"
)

// pages serves the page, its assets and what a screen shows beside it:
// the QR codes and the join codes; and it holds the browser-facing
// policies (CORS, the Content-Security-Policy) the other routes share.
type pages struct {
	cfg   *Config
	state *state.State
	qr    *qr.Codes
	joins *join.Codes
}

// The broadcaster's views of a poll — the presenter screen, the on-air
// overlay and the embed — are the page itself (web/static), which picks
// its view from the path; this file serves them, the QR code of the
// voting address, and what lets the sites named in --origins use them:
// framing of the embed and CORS on the public read endpoints. It also
// serves the JavaScript client the page runs on, at /client.js.
//
// Every page response carries a strict Content-Security-Policy (csp):
// nothing but this node's own files runs, styles or connects; who may
// frame it; and where its images may come from — this node, data: and the
// hosts of --logo-hosts, so a ?logo= from anywhere else is never fetched.

// pageRoutes adds the views and the QR code to mux.
func (p *pages) routes(mux routeMux, ready func(http.Handler) http.Handler) {
	index, err := fs.ReadFile(web.FS(), "index.html")
	if err != nil {
		panic(err) // embedded at build time
	}
	// The broadcaster's views carry --public-url, so the address printed
	// under the QR code is the one the code holds.
	if p.cfg.PublicURL != "" {
		meta := `<meta name="tally-public-url" content="` + html.EscapeString(p.cfg.PublicURL) + `">`
		index = bytes.Replace(index, []byte("<head>"), []byte("<head>\n"+meta), 1)
	}
	// The hosts ?logo= may name besides this site, for the page's own check.
	if len(p.cfg.LogoHosts) > 0 {
		meta := `<meta name="tally-logo-hosts" content="` + html.EscapeString(strings.Join(p.cfg.LogoHosts, " ")) + `">`
		index = bytes.Replace(index, []byte("<head>"), []byte("<head>\n"+meta), 1)
	}
	for _, route := range []string{"present/{poll}", "overlay/{poll}", "embed/{poll}", "present/event/{event}", "overlay/event/{event}",
		"present/quiz/{quiz}", "overlay/quiz/{quiz}"} {
		mux.HandleFunc("GET /"+route, func(w http.ResponseWriter, r *http.Request) {
			ancestors := "'self'"
			if strings.HasPrefix(route, "embed/") {
				ancestors = p.frameAncestors()
			}
			w.Header().Set("Content-Security-Policy", p.csp(ancestors))
			w.Header().Set("Cache-Control", "no-cache")
			http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(index))
		})
	}
	mux.Handle("GET /v1/polls/{poll}/qr.png", ready(http.HandlerFunc(p.handleQR)))
	mux.Handle("GET /v1/quizzes/{quiz}/qr.png", ready(http.HandlerFunc(p.handleQuizQR)))
	mux.Handle("GET /v1/join/{code}", p.cors(ready(http.HandlerFunc(p.joins.ServeCode))))
	mux.Handle("GET /j/{code}", p.withCSP(ready(http.HandlerFunc(p.joins.ServePage))))
	// The JavaScript client, which the page imports as an ES module (and
	// so may the sites --origins names: a module import is a CORS request).
	mux.Handle("GET /client.js", p.cors(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, "client.js", time.Time{}, bytes.NewReader(tallyjs.Source))
	})))
}

// voteURL is the address a viewer votes at: --public-url, or the address
// the request came to.
func (p *pages) voteURL(r *http.Request, pollID string) string {
	return p.publicBase(r) + "/#/poll/" + url.PathEscape(pollID)
}

// publicBase is the page's address for viewers: --public-url, or the
// address the request came to.
func (p *pages) publicBase(r *http.Request) string {
	if p.cfg.PublicURL != "" {
		return p.cfg.PublicURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// frameAncestors lists who may frame the embed: this node and every
// --origins pattern that CSP can say, over http and https.
func (p *pages) frameAncestors() string {
	out := []string{"'self'"}
	for _, o := range p.cfg.Origins {
		if !cspHostSource(o) {
			continue // a path.Match class, a "*" inside a label or the like: CSP has no way to say it
		}
		out = append(out, "https://"+o, "http://"+o)
	}
	return strings.Join(out, " ")
}

// cspHostSource reports whether an --origins pattern means to a CSP
// host-source what it means to path.Match: a host name whose first label
// alone may be "*" (any subdomain), or "*" (any host), then a port or
// ":*" (any port) if the pattern has one.
func cspHostSource(pattern string) bool {
	host, port, hasPort := strings.Cut(pattern, ":")
	if hasPort && port != "*" && (port == "" || strings.Trim(port, "0123456789") != "") {
		return false
	}
	return host == "*" || hostName(strings.TrimPrefix(host, "*."))
}

// csp is the Content-Security-Policy of every page response (the views,
// the home page and its files, the join redirect), built here alone
// (docs/page.md, "Content-Security-Policy"). What varies comes first: the
// frame-ancestors given, and images from this node (the QR codes, a logo
// on its own site), data: and the --logo-hosts over https only. The rest
// is fixed: everything else from this node alone — scripts from its files
// (no inline script or handler attribute, no eval), styles from
// style.css (no <style>, no style attribute: the page sets styles
// through the CSSOM), connections to its own origin (its API, and its
// WebSocket: 'self' covers ws: and wss: of the same host), the puzzle's
// Worker from /client.js — no plugins, no <base>, and forms only to
// itself.
func (p *pages) csp(ancestors string) string {
	img := []string{"'self'", "data:"}
	for _, h := range p.cfg.LogoHosts {
		img = append(img, "https://"+h)
	}
	return strings.Join([]string{
		"frame-ancestors " + ancestors,
		"img-src " + strings.Join(img, " "),
		"default-src 'self'",
		"script-src 'self'",
		"style-src 'self'",
		"connect-src 'self'",
		"object-src 'none'",
		"base-uri 'none'",
		"form-action 'self'",
	}, "; ")
}

// withCSP serves h with the page's Content-Security-Policy, framed by
// this node alone: for the HTML that is not the page (the join address's
// redirect, whose body is a link).
func (p *pages) withCSP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", p.csp("'self'"))
		h.ServeHTTP(w, r)
	})
}

// parseLogoHosts reads --logo-hosts: comma-separated host names, in ASCII
// (an international name in its xn-- form). Anything else — a scheme, a
// port, a path, a wildcard — is refused: each name goes into the
// Content-Security-Policy header as it is.
func parseLogoHosts(s string) ([]string, error) {
	var out []string
	for _, h := range strings.Split(s, ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h == "" {
			continue
		}
		if !hostName(h) {
			return nil, fmt.Errorf("%q is not a host name (like cdn.example.com: no scheme, port, path or wildcard)", h)
		}
		out = append(out, h)
	}
	return out, nil
}

// hostName reports whether h is a DNS name of letters, digits and hyphens
// (or a dotted IPv4 address): labels of 1-63, no hyphen at either end.
func hostName(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' ||
			strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return false
		}
	}
	return true
}

// origins is who may write from a browser and read across sites
// (browserOrigins).
func (p *pages) origins() api.Origins { return browserOrigins(p.cfg) }

// browserOrigins is who may write from a browser, open a stream and read
// across sites: this site (--public-url's host, else the request's) and
// the --origins patterns.
func browserOrigins(cfg *Config) api.Origins {
	o := api.Origins{Patterns: cfg.Origins}
	if u, err := url.Parse(cfg.PublicURL); err == nil && cfg.PublicURL != "" {
		o.PublicHost = strings.ToLower(u.Host)
	}
	return o
}

// cors lets the --origins sites read h from their pages: a simple GET
// (no preflight) with the Origin echoed back. Other origins get no CORS
// headers, and their browsers keep the answer from them.
func (p *pages) cors(h http.Handler) http.Handler {
	if len(p.cfg.Origins) == 0 {
		return h
	}
	origins := p.origins()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Origin")
		if o := r.Header.Get("Origin"); o != "" && origins.Embedder(o) {
			w.Header().Set("Access-Control-Allow-Origin", o)
		}
		h.ServeHTTP(w, r)
	})
}

// handleQR serves GET /v1/polls/{poll}/qr.png: the voting address as a QR
// code. A quiz question not yet started is 404, as on every other public
// endpoint.
func (p *pages) handleQR(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("poll")
	if def, ok := p.state.Defs.Poll(id); !ok || def.Withheld(p.cfg.Now().UnixMilli()) {
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", id))
		return
	}
	p.qr.Serve(w, r, p.voteURL(r, id), time.Now())
}

// handleQuizQR serves GET /v1/quizzes/{quiz}/qr.png: the quiz's join
// address (its participant page) as a QR code, for the studio screen's
// lobby.
func (p *pages) handleQuizQR(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("quiz")
	if _, ok := api.QuizOf(p.state.Quizzes, id, false, p.cfg.Now().UnixMilli()); !ok {
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodeQuizNotFound, "no quiz %q", id))
		return
	}
	p.qr.Serve(w, r, p.publicBase(r)+"/#/quiz/"+url.PathEscape(id), time.Now())
}
