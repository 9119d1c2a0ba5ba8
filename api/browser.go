package api

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
)

// CodeCrossSite (403): a browser write came from a page of another site
// than this one or the embedders --origins names; nothing was taken.
const CodeCrossSite = "cross_site"

// Any web page can make its visitors' browsers send requests to any
// address. A "simple" request — a POST whose Content-Type is absent,
// text/plain, or a form's — goes out without asking the server first, and
// carries the visitor's own address, so a popular page could vote for
// every visitor it has. Two rules stop it, both here:
//
//   - A browser write must come from this site or an allowed embedder
//     (Origins.CheckWrite): the Origin a browser puts on every POST, or its
//     Sec-Fetch-Site, names the page that sent it.
//   - Its body must be declared application/json (RequireJSON): a browser
//     asks before sending that across sites (a CORS preflight), and only
//     an allowed embedder is answered yes (Origins.Preflight).
//
// A client that is not a browser sends no Origin and passes the first
// rule; it sends application/json as it always has.

// Origins is who may write from a browser: this site — the host of
// --public-url, or the address the request came to (sameSite) — and the
// embedders --origins names (host patterns, path.Match, lower case).
type Origins struct {
	Patterns   []string // the embedders' host patterns
	PublicHost string   // the host (and port) of --public-url; "" when none
}

// Embedder reports whether origin (an Origin header's value) is one of
// the sites the patterns name, over http or https.
func (o Origins) Embedder(origin string) bool {
	host, ok := originHost(origin)
	if !ok {
		return false
	}
	for _, p := range o.Patterns {
		if ok, _ := path.Match(p, host); ok {
			return true
		}
	}
	return false
}

// sameSite reports whether origin is this site: --public-url's host, or
// the host r came to when that is an address (an IP literal) or
// localhost. A name in the Host header is not believed: a page on a name
// its author points at this node's address (DNS rebinding) sends its own
// name as Host and Origin alike. An operator who opens the screens at the
// node's address still can; a node reached under other names lists them
// in --origins (or sets --public-url).
func (o Origins) sameSite(r *http.Request, origin string) bool {
	host, ok := originHost(origin)
	if !ok {
		return false
	}
	if o.PublicHost != "" && host == o.PublicHost {
		return true
	}
	return strings.EqualFold(host, r.Host) && addressOrLocalhost(r.Host)
}

// addressOrLocalhost reports whether a Host header names an IP address or
// localhost (which no page of the Internet can be rebound to), with or
// without a port.
func addressOrLocalhost(hostport string) bool {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	h = strings.ToLower(h)
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// CheckWrite refuses (403 cross_site) a write that a page of another site
// sent: one whose Origin is neither this site nor an embedder — "null"
// (a sandboxed frame, a file) included — and one that its browser marks
// Sec-Fetch-Site: cross-site without an embedder's Origin. A request with
// neither header is a program's, not a browser's page's, and passes.
func (o Origins) CheckWrite(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		if strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site") {
			return Errorf(http.StatusForbidden, CodeCrossSite, "a browser request from another site's page is refused: this one says Sec-Fetch-Site: cross-site and names no Origin")
		}
		return nil
	}
	if o.sameSite(r, origin) || o.Embedder(origin) {
		return nil
	}
	return Errorf(http.StatusForbidden, CodeCrossSite, "a browser request from another site's page is refused: Origin %.100q is neither this site nor one of the sites --origins allows", origin)
}

// RequireJSON refuses (415) a request whose Content-Type is not
// application/json, with no parameter but charset=utf-8: a missing type,
// text/plain and a form's are what a browser sends across sites without
// asking first; any other charset would be read as UTF-8 and mean
// something else.
func RequireJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return Errorf(http.StatusUnsupportedMediaType, CodeInvalidRequest, "content type must be application/json, and none was given")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return Errorf(http.StatusUnsupportedMediaType, CodeInvalidRequest, "content type must be application/json, got %.100q", ct)
	}
	for k, v := range params {
		if k != "charset" {
			return Errorf(http.StatusUnsupportedMediaType, CodeInvalidRequest, "content type application/json takes no parameter %.40q", k)
		}
		if !strings.EqualFold(v, "utf-8") {
			return Errorf(http.StatusUnsupportedMediaType, CodeInvalidRequest, "charset must be utf-8 (or none), got %.40q", v)
		}
	}
	return nil
}

// BrowserWrite wraps a state-changing endpoint that a browser can reach
// (votes, voter sessions): it refuses a write from another site
// (CheckWrite) and one not declared JSON (RequireJSON), before h reads
// anything; and it lets an embedder's page read the answer (CORS).
func BrowserWrite(o Origins, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := o.CheckWrite(r); err != nil {
			WriteError(w, r, err)
			return
		}
		if err := RequireJSON(r); err != nil {
			WriteError(w, r, err)
			return
		}
		o.grant(w, r)
		h.ServeHTTP(w, r)
	})
}

// SameSiteOnly wraps a write that needs more than a browser can send
// across sites by itself (the host's, behind the admin token): it refuses
// a write from another site's page (CheckWrite), whatever it carries.
func (o Origins) SameSiteOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := o.CheckWrite(r); err != nil {
			WriteError(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// grant lets an embedder's page read the answer.
func (o Origins) grant(w http.ResponseWriter, r *http.Request) {
	if len(o.Patterns) == 0 {
		return
	}
	w.Header().Add("Vary", "Origin")
	if origin := r.Header.Get("Origin"); origin != "" && o.Embedder(origin) {
		w.Header().Set("Access-Control-Allow-Origin", origin)
	}
}

// Preflight answers a browser's OPTIONS before a cross-site write: yes
// (204, for 10 minutes) to an embedder's page, for POST with the headers
// the clients send; 403 cross_site to any other.
func (o Origins) Preflight(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	w.Header().Add("Vary", "Origin")
	if origin == "" || !o.Embedder(origin) {
		WriteError(w, r, Errorf(http.StatusForbidden, CodeCrossSite, "no cross-site write is allowed from Origin %.100q: only the sites --origins names may write from their pages", origin))
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Methods", "POST")
	h.Set("Access-Control-Allow-Headers", "Content-Type, "+SessionHeader)
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

// originHost returns an http(s) Origin's host (and port), lower case.
func originHost(origin string) (string, bool) {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.Path != "" || u.User != nil {
		return "", false
	}
	return strings.ToLower(u.Host), true
}
