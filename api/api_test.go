package api

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestWriteErrorShapes(t *testing.T) {
	w := httptest.NewRecorder()
	e := Errorf(http.StatusTooManyRequests, CodeRateLimited, "slow down")
	e.RetryAfter = 1500 * time.Millisecond
	r := httptest.NewRequest("GET", "/v1/x", nil)
	WriteError(w, r, e)
	if w.Code != 429 || w.Header().Get("Retry-After") != "2" || !strings.Contains(w.Body.String(), `"code":"rate_limited"`) {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	// An internal error is logged to the logger the server injected, and
	// its text stays out of the answer.
	var logged bytes.Buffer
	h := WithLogger(slog.New(slog.NewTextHandler(&logged, nil)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, errors.New("disk on fire"))
	}))
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 500 || strings.Contains(w.Body.String(), "disk") {
		t.Fatalf("internal errors must not leak: %d %s", w.Code, w.Body)
	}
	if !strings.Contains(logged.String(), "disk on fire") || !strings.Contains(logged.String(), "path=/v1/x") {
		t.Fatalf("the injected logger got %q", logged.String())
	}
}

func TestDecodeJSON(t *testing.T) {
	type body struct{ A string }
	cases := []struct {
		name, ct, in string
		status       int
	}{
		{"ok", "application/json", `{"A":"x"}`, 0},
		{"ok with charset", "application/json; charset=utf-8", `{"A":"x"}`, 0},
		{"ok with charset in capitals", "Application/JSON; Charset=\"UTF-8\"", `{"A":"x"}`, 0},
		{"no content type", "", `{"A":"x"}`, 415},
		{"text", "text/plain", `{"A":"x"}`, 415},
		{"latin1", "application/json; charset=latin1", `{"A":"x"}`, 415},
		{"utf-16", "application/json; charset=utf-16", `{"A":"x"}`, 415},
		{"other parameter", "application/json; profile=x", `{"A":"x"}`, 415},
		{"malformed type", "application/json; charset", `{"A":"x"}`, 415},
		{"json suffix", "application/vnd.api+json", `{"A":"x"}`, 415},
		{"form", "application/x-www-form-urlencoded", `{"A":"x"}`, 415},
		{"too big", "application/json", `{"A":"` + strings.Repeat("x", 100) + `"}`, 413},
		{"unknown field", "application/json", `{"B":1}`, 400},
		{"bad utf8", "application/json", "{\"A\":\"\xff\"}", 400},
		{"trailing", "application/json", `{"A":"x"}{}`, 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", strings.NewReader(c.in))
			if c.ct != "" {
				r.Header.Set("Content-Type", c.ct)
			}
			var v body
			err := DecodeJSON(httptest.NewRecorder(), r, 64, &v)
			var e *Error
			switch {
			case c.status == 0 && err != nil:
				t.Fatalf("unexpected error %v", err)
			case c.status != 0 && (!errors.As(err, &e) || e.Status != c.status):
				t.Fatalf("err = %v, want status %d", err, c.status)
			}
		})
	}
}

func TestRequireBearer(t *testing.T) {
	h := RequireBearer([]string{"s3cret"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	for header, want := range map[string]int{"": 401, "Bearer nope": 401, "s3cret": 401, "Bearer s3cret": 204,
		// The scheme's case is free (RFC 9110 section 11.1), the token's is not.
		"bearer s3cret": 204, "BEARER s3cret": 204, "bEaReR s3cret": 204, "bearer S3CRET": 401, "Bearers3cret": 401, "Basic s3cret": 401,
		"Bearer  s3cret": 204, "Bearer s3cret ": 401, "Bearer s3 cret": 401} {
		r := httptest.NewRequest("GET", "/", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("%q: %d, want %d", header, w.Code, want)
		}
	}
	empty := RequireBearer([]string{""}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer ")
	w := httptest.NewRecorder()
	empty.ServeHTTP(w, r)
	if w.Code != 401 {
		t.Fatal("an empty token must not open the door")
	}
}
