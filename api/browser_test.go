package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A browser write is taken from this site and the embedders only, and
// only declared as JSON: what a page of another site can make its
// visitors' browsers send is refused before anything is read.
func TestBrowserWrite(t *testing.T) {
	o := Origins{Patterns: []string{"partner.example", "*.news.example"}, PublicHost: "vote.example.com"}
	var reached int
	h := BrowserWrite(o, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++; w.WriteHeader(204) }))
	cases := []struct {
		name          string
		origin, site  string // Origin and Sec-Fetch-Site; "" for none
		ct            string
		status        int
		code, allowed string // the error code; the Access-Control-Allow-Origin wanted
	}{
		{"a program", "", "", "application/json", 204, "", ""},
		// With --public-url, the Host header is not this site: a page on a
		// name rebound to the node's address sends Host and Origin alike.
		{"a rebound name", "http://node.internal:8080", "same-origin", "application/json", 403, CodeCrossSite, ""},
		{"this site by its public address", "https://vote.example.com", "same-origin", "application/json; charset=utf-8", 204, "", ""},
		{"an embedder", "https://partner.example", "cross-site", "application/json", 204, "", "https://partner.example"},
		{"an embedder's subdomain", "https://live.news.example", "cross-site", "application/json", 204, "", "https://live.news.example"},
		{"another site", "https://evil.example", "cross-site", "application/json", 403, CodeCrossSite, ""},
		{"another site, no-cors text", "https://evil.example", "cross-site", "text/plain", 403, CodeCrossSite, ""},
		{"another site, no type", "https://evil.example", "cross-site", "", 403, CodeCrossSite, ""},
		{"a look-alike host", "https://vote.example.com.evil.example", "cross-site", "application/json", 403, CodeCrossSite, ""},
		{"a sandboxed frame", "null", "cross-site", "application/json", 403, CodeCrossSite, ""},
		{"another scheme", "ftp://vote.example.com", "", "application/json", 403, CodeCrossSite, ""},
		{"cross-site without an Origin", "", "cross-site", "application/json", 403, CodeCrossSite, ""},
		{"an embedder's form", "https://partner.example", "cross-site", "application/x-www-form-urlencoded", 415, CodeInvalidRequest, ""},
		{"this site, no type", "https://vote.example.com", "same-origin", "", 415, CodeInvalidRequest, ""},
		{"this site, text", "https://vote.example.com", "same-origin", "text/plain;charset=UTF-8", 415, CodeInvalidRequest, ""},
		{"a program, latin1", "", "", "application/json; charset=latin1", 415, CodeInvalidRequest, ""},
		{"a program, multipart", "", "", "multipart/form-data; boundary=x", 415, CodeInvalidRequest, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := reached
			r := httptest.NewRequest("POST", "http://node.internal:8080/v1/polls/p/votes", strings.NewReader(`{"option":"a"}`))
			for k, v := range map[string]string{"Origin": c.origin, "Sec-Fetch-Site": c.site, "Content-Type": c.ct} {
				if v != "" {
					r.Header.Set(k, v)
				}
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != c.status || c.code != "" && !strings.Contains(w.Body.String(), `"code":"`+c.code+`"`) {
				t.Fatalf("%d %s, want %d %s", w.Code, w.Body, c.status, c.code)
			}
			if got := w.Header().Get("Access-Control-Allow-Origin"); got != c.allowed {
				t.Fatalf("Access-Control-Allow-Origin %q, want %q", got, c.allowed)
			}
			if (reached > before) != (c.status < 300) {
				t.Fatalf("the handler ran: %v, on a %d", reached > before, c.status)
			}
		})
	}
}

// This site, besides --public-url's host, is the address the request
// came to — an IP literal or localhost — never a name in the Host header,
// which a page on a name rebound to the node's address sends as its own.
func TestBrowserWriteThisAddress(t *testing.T) {
	h := BrowserWrite(Origins{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	for _, c := range []struct {
		host, origin string
		want         int
	}{
		{"203.0.113.5:8080", "http://203.0.113.5:8080", 204},
		{"203.0.113.5:8080", "https://203.0.113.5:8080", 204},
		{"[2001:db8::1]:8080", "http://[2001:db8::1]:8080", 204},
		{"localhost:8080", "http://localhost:8080", 204},
		{"studio.localhost", "http://studio.localhost", 204},
		{"203.0.113.5:8080", "http://203.0.113.5:8081", 403},
		{"node.internal:8080", "http://node.internal:8080", 403}, // a name: rebinding
		{"evil.example", "http://evil.example", 403},
	} {
		r := httptest.NewRequest("POST", "http://"+c.host+"/v1/session", nil)
		r.Host = c.host
		r.Header.Set("Origin", c.origin)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("Host %s, Origin %s: %d, want %d", c.host, c.origin, w.Code, c.want)
		}
	}
}

// A preflight is answered yes for an embedder only.
func TestPreflight(t *testing.T) {
	o := Origins{Patterns: []string{"partner.example"}}
	for origin, want := range map[string]int{"https://partner.example": 204, "https://evil.example": 403, "": 403, "null": 403} {
		r := httptest.NewRequest("OPTIONS", "/v1/session", nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		r.Header.Set("Access-Control-Request-Method", "POST")
		w := httptest.NewRecorder()
		o.Preflight(w, r)
		if w.Code != want {
			t.Errorf("%q: %d, want %d", origin, w.Code, want)
		}
		if ok := w.Header().Get("Access-Control-Allow-Origin") == origin && origin != ""; ok != (want == 204) {
			t.Errorf("%q: granted %v", origin, ok)
		}
		if want == 204 && !strings.Contains(w.Header().Get("Access-Control-Allow-Headers"), SessionHeader) {
			t.Errorf("the preflight does not allow the session header: %v", w.Header())
		}
	}
}

// A host write behind the admin token is refused from another site's
// page, and taken from this site and from programs.
func TestSameSiteOnly(t *testing.T) {
	h := Origins{PublicHost: "example.com"}.SameSiteOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	for origin, want := range map[string]int{"": 204, "http://example.com": 204, "https://evil.example": 403} {
		r := httptest.NewRequest("POST", "http://example.com/v1/polls/p/close", nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("%q: %d, want %d", origin, w.Code, want)
		}
	}
}

// RequireJSON reads any header a client sends without panicking, and
// takes only JSON in UTF-8.
func FuzzRequireJSON(f *testing.F) {
	for _, s := range []string{"application/json", "application/json; charset=utf-8", "text/plain", "", "application/json; charset=\"", "a/b;;;c=d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("Content-Type", ct)
		if err := RequireJSON(r); err == nil && !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "application/json") {
			t.Fatalf("took %q", ct)
		}
	})
}
