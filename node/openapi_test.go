package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"go.yaml.in/yaml/v3"

	"tally/api"
	"tally/ids"
)

// contract validates a running node's answers against docs/openapi.yaml
// and records which operations were exercised.
type contract struct {
	t    *testing.T
	tn   *testNode
	r    routers.Router
	seen map[string]bool // "GET /v1/polls/{poll}" of the document
	ops  map[string]bool // every operation in the document
}

func newContract(t *testing.T, tn *testNode) *contract {
	b, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// kin-openapi (OpenAPI 3.1 with JSON Schema 2020-12): the document must
	// be valid, and every request and answer is checked against it.
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	var raw struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	c := &contract{t: t, tn: tn, r: router, seen: map[string]bool{}, ops: map[string]bool{}}
	for path, item := range raw.Paths {
		for method := range item {
			if method != "parameters" {
				c.ops[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	return c
}

// do sends one request and validates the answer against the document
// (and, when wellFormed, the request too). It returns the answer with its
// body read.
func (c *contract) do(op, method, path, body string, wellFormed bool, headers ...string) (*http.Response, []byte) {
	c.t.Helper()
	if !c.ops[op] {
		c.t.Fatalf("%s is not an operation of docs/openapi.yaml", op)
	}
	c.seen[op] = true
	req, err := http.NewRequest(method, c.tn.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" || method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json") // as every client does
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := *c.tn.client // a redirect is an answer to check, not to follow
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := client.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	var raw []byte
	if res.StatusCode == http.StatusSwitchingProtocols || strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		res.Body.Close() // a stream: the headers are the answer
	} else {
		raw, _ = io.ReadAll(res.Body)
		res.Body.Close()
	}
	res.Body = io.NopCloser(bytes.NewReader(raw))
	vreq, _ := http.NewRequest(method, "http://127.0.0.1:8080"+path, strings.NewReader(body))
	vreq.Header = req.Header.Clone()
	for _, err := range c.validate(vreq, res, raw, wellFormed) {
		c.t.Errorf("%s %s → %d %s: %v", method, path, res.StatusCode, truncate(raw), err)
	}
	res.Body = io.NopCloser(bytes.NewReader(raw))
	return res, raw
}

// validate checks an answer (and, when wellFormed, its request) against
// the document. Bodies are checked where the document's media type is one
// kin-openapi decodes (JSON, text); a stream's or an image's are not.
func (c *contract) validate(req *http.Request, res *http.Response, raw []byte, wellFormed bool) []error {
	route, params, err := c.r.FindRoute(req)
	if err != nil {
		return []error{fmt.Errorf("no operation of docs/openapi.yaml: %w", err)}
	}
	ctx := context.Background()
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	var errs []error
	if wellFormed {
		errs = append(errs, unwrapMulti(openapi3filter.ValidateRequest(ctx, in))...)
	}
	ct := res.Header.Get("Content-Type")
	decoded := strings.Contains(ct, "json") || strings.HasPrefix(ct, "text/plain")
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, ExcludeResponseBody: !decoded}}
	out.SetBodyBytes(raw)
	return append(errs, unwrapMulti(openapi3filter.ValidateResponse(ctx, out))...)
}

// unwrapMulti lists the errors an openapi3.MultiError holds.
func unwrapMulti(err error) []error {
	if err == nil {
		return nil
	}
	var multi openapi3.MultiError
	if errors.As(err, &multi) {
		var out []error
		for _, e := range multi {
			out = append(out, unwrapMulti(e)...)
		}
		return out
	}
	return []error{err}
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// want fails unless the answer has the status (and, for errors, the code).
func (c *contract) want(res *http.Response, raw []byte, status int, code string) {
	c.t.Helper()
	if res.StatusCode != status || code != "" && !bytes.Contains(raw, []byte(`"code":"`+code+`"`)) {
		c.t.Errorf("%s %s: got %d %s, want %d %s", res.Request.Method, res.Request.URL.RequestURI(), res.StatusCode, truncate(raw), status, code)
	}
}

// contractStep is one request of the contract's walk and the answer it
// must get, or (op empty) a step between requests.
type contractStep struct {
	op, method, path, body string
	wellFormed             bool     // the request is valid by the document
	admin                  bool     // sent with the admin token
	headers                []string // more headers, name then value
	status                 int
	also                   int    // another status the answer may have (then nothing more is checked)
	code                   string // the error code; empty for a success
	check                  func(t *testing.T, raw []byte)
	then                   func()        // op empty: moves the clock, waits
	pathOf                 func() string // the path, known only when the step runs
}

// TestOpenAPIContract drives a running node through every endpoint of
// docs/openapi.yaml, the error cases included, and validates every
// request and answer against the document. Every operation of the
// document is exercised, and every route the node serves is in it.
func TestOpenAPIContract(t *testing.T) {
	tn := startNode(t, t.TempDir(), func(c *Config) { c.PowBits, c.Origins = NoPuzzle, []string{"partner.example"} })
	c := newContract(t, tn)
	ws := []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}
	var leaf string // a vote's receipt's, on p2
	steps := []contractStep{
		// Polls.
		{op: "POST /v1/polls", method: "POST", path: "/v1/polls", body: `{"id":"p1","question":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":60,"grace_s":1,"event":"show","hidden":true,"limits":{"ip_rate":100}}`, wellFormed: true, admin: true, status: 201},
		{op: "POST /v1/polls", method: "POST", path: "/v1/polls", body: `{"id":"p1","question":"Again?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]}`, wellFormed: true, admin: true, status: 409, code: "invalid_request"},
		{op: "POST /v1/polls", method: "POST", path: "/v1/polls", body: `{"question":"One?","options":[{"id":"a","label":"A"}]}`, admin: true, status: 400, code: "invalid_request"},
		{op: "POST /v1/polls", method: "POST", path: "/v1/polls", body: `{"question":`, admin: true, status: 400, code: "invalid_request"},
		{op: "POST /v1/polls", method: "POST", path: "/v1/polls", body: `{"question":"` + strings.Repeat("x", 70_000) + `"}`, admin: true, status: 413, code: "too_large"},
		{op: "POST /v1/polls", method: "POST", path: "/v1/polls", body: `{"question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]}`, status: 401, code: "unauthorized"},
		{op: "POST /v1/polls", method: "POST", path: "/v1/polls", body: `{"id":"p2","question":"Other?","options":[{"id":"x","label":"X"},{"id":"y","label":"Y"}],"duration_s":60,"grace_s":1}`, wellFormed: true, admin: true, status: 201},

		{op: "GET /v1/polls", method: "GET", path: "/v1/polls?limit=1", wellFormed: true, status: 200},
		{op: "GET /v1/polls", method: "GET", path: "/v1/polls?event=show", wellFormed: true, status: 200},
		{op: "GET /v1/polls", method: "GET", path: "/v1/polls?limit=0", status: 400, code: "invalid_request"},
		{op: "GET /v1/polls", method: "GET", path: "/v1/polls?cursor=%%%", status: 400, code: "invalid_request"},
		{op: "GET /v1/polls/{poll}", method: "GET", path: "/v1/polls/p1", wellFormed: true, status: 200, check: func(t *testing.T, raw []byte) {
			if bytes.Contains(raw, []byte("totals")) {
				t.Errorf("a hidden poll's public view has counts: %s", raw)
			}
		}},
		{op: "GET /v1/polls/{poll}", method: "GET", path: "/v1/polls/p1", wellFormed: true, admin: true, status: 200},
		{op: "GET /v1/polls/{poll}", method: "GET", path: "/v1/polls/p1", headers: []string{"Authorization", "Bearer wrong"}, status: 401, code: "unauthorized"},
		{op: "GET /v1/polls/{poll}", method: "GET", path: "/v1/polls/nope", wellFormed: true, status: 404, code: "poll_not_found"},

		// Votes.
		{op: "POST /v1/polls/{poll}/votes", method: "POST", path: "/v1/polls/p1/votes", body: `{"option":"a","voter":"v1","idem":"k1"}`, wellFormed: true, status: 200},
		{op: "POST /v1/polls/{poll}/votes", method: "POST", path: "/v1/polls/p1/votes", body: `{"votes":[{"option":"a","voter":"v1","idem":"k1"},{"option":"b","voter":"v2","idem":"k2"}]}`, wellFormed: true, status: 200},
		{op: "POST /v1/polls/{poll}/votes", method: "POST", path: "/v1/polls/p1/votes", body: `{"option":"z","voter":"v3","idem":"k3"}`, wellFormed: true, status: 422, code: "invalid_option"},
		{op: "POST /v1/polls/{poll}/votes", method: "POST", path: "/v1/polls/p1/votes", body: `{"votes":[]}`, status: 400, code: "invalid_request"},
		{op: "POST /v1/polls/{poll}/votes", method: "POST", path: "/v1/polls/nope/votes", body: `{"option":"a","voter":"v1","idem":"k9"}`, wellFormed: true, status: 404, code: "poll_not_found"},
		{op: "POST /v1/polls/{poll}/votes", method: "POST", path: "/v1/polls/p1/votes", body: `{"option":"a","voter":"v4","idem":"k4"}`, headers: []string{"Content-Type", "text/plain"}, status: 415, code: "invalid_request"},
		{op: "POST /v1/polls/{poll}/votes", method: "POST", path: "/v1/polls/p1/votes", body: `{"option":"a","voter":"v4","idem":"k4"}`, headers: []string{"Content-Type", "application/json; charset=latin1"}, status: 415, code: "invalid_request"},
		{op: "POST /v1/polls/{poll}/votes", method: "POST", path: "/v1/polls/p1/votes", body: `{"option":"a","voter":"v4","idem":"k4"}`, wellFormed: true, headers: []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, status: 403, code: "cross_site"},
		{op: "OPTIONS /v1/polls/{poll}/votes", method: "OPTIONS", path: "/v1/polls/p1/votes", wellFormed: true, headers: []string{"Origin", "https://partner.example", "Access-Control-Request-Method", "POST"}, status: 204},
		{op: "OPTIONS /v1/polls/{poll}/votes", method: "OPTIONS", path: "/v1/polls/p1/votes", wellFormed: true, headers: []string{"Origin", "https://evil.example", "Access-Control-Request-Method", "POST"}, status: 403, code: "cross_site"},
		{op: "POST /v1/polls/{poll}/votes", method: "POST", path: "/v1/polls/p1/votes", body: `{"option":"a","voter":"v5","idem":"k5"}`, wellFormed: true, headers: []string{"Tally-Session", "s1.forged"}, status: 401, code: "session_invalid"},

		// A quiz question: an answer timed by the node, a second one refused.
		{op: "POST /v1/polls", method: "POST", path: "/v1/polls", body: quizQuestion, wellFormed: true, admin: true, status: 201},
		{op: "GET /v1/polls/{poll}", method: "GET", path: "/v1/polls/q1-0", wellFormed: true, status: 200},
		{op: "POST /v1/polls/{poll}/votes", method: "POST", path: "/v1/polls/q1-0/votes", body: `{"option":"b","voter":"p1","idem":"qa1","name":"Ann"}`, wellFormed: true, status: 200},
		{op: "POST /v1/polls/{poll}/votes", method: "POST", path: "/v1/polls/q1-0/votes", body: `{"option":"a","voter":"p1","idem":"qa2"}`, wellFormed: true, status: 409, code: "already_answered"},

		// A quiz: created, started, answered, closed, revealed, ranked, ended.
		{op: "POST /v1/quizzes", method: "POST", path: "/v1/quizzes", body: pubQuiz, wellFormed: true, admin: true, status: 201},
		{op: "POST /v1/quizzes", method: "POST", path: "/v1/quizzes", body: `{"id":"bad","questions":[]}`, admin: true, status: 400, code: "invalid_request"},
		{op: "GET /v1/quizzes/{quiz}", method: "GET", path: "/v1/quizzes/pub", wellFormed: true, status: 200},
		{op: "GET /v1/quizzes/{quiz}", method: "GET", path: "/v1/quizzes/nope", wellFormed: true, status: 404, code: "quiz_not_found"},
		{op: "GET /v1/quizzes/{quiz}/qr.png", method: "GET", path: "/v1/quizzes/pub/qr.png?size=128", wellFormed: true, status: 200},
		{op: "GET /v1/quizzes/{quiz}/qr.png", method: "GET", path: "/v1/quizzes/nope/qr.png", wellFormed: true, status: 404, code: "quiz_not_found"},
		{op: "GET /v1/quizzes/{quiz}/qr.png", method: "GET", path: "/v1/quizzes/pub/qr.png?size=99999", status: 400, code: "invalid_request"},
		{op: "GET /present/quiz/{quiz}", method: "GET", path: "/present/quiz/pub", wellFormed: true, status: 200},
		// Join codes: a poll's, an event's (its current poll) and a quiz's.
		{op: "GET /v1/join/{code}", method: "GET", path: "/v1/join/" + ids.JoinCode(ids.JoinPoll, "p1"), wellFormed: true, status: 200},
		{op: "GET /v1/join/{code}", method: "GET", path: "/v1/join/" + strings.ToLower(ids.JoinCode(ids.JoinEvent, "show")), wellFormed: true, status: 200},
		{op: "GET /v1/join/{code}", method: "GET", path: "/v1/join/%23" + ids.JoinCode(ids.JoinQuiz, "pub"), wellFormed: true, status: 200},
		{op: "GET /v1/join/{code}", method: "GET", path: "/v1/join/ZZZZZZ", wellFormed: true, status: 404, code: "join_code_not_found"},
		{op: "GET /v1/join/{code}", method: "GET", path: "/v1/join/OOOOOO", status: 400, code: "invalid_request"},
		{op: "GET /j/{code}", method: "GET", path: "/j/" + ids.JoinCode(ids.JoinQuiz, "pub"), wellFormed: true, status: 302},
		{op: "GET /overlay/quiz/{quiz}", method: "GET", path: "/overlay/quiz/pub", wellFormed: true, status: 200},
		{op: "POST /v1/quizzes/{quiz}/start", method: "POST", path: "/v1/quizzes/pub/start", status: 401, code: "unauthorized"},
		{op: "POST /v1/quizzes/{quiz}/reveal", method: "POST", path: "/v1/quizzes/pub/reveal", wellFormed: true, admin: true, status: 409, code: "poll_not_open"},
		{op: "POST /v1/quizzes/{quiz}/start", method: "POST", path: "/v1/quizzes/pub/start", wellFormed: true, admin: true, status: 200},
		{op: "POST /v1/quizzes/{quiz}/start", method: "POST", path: "/v1/quizzes/pub/start", wellFormed: true, admin: true, status: 409, code: "poll_not_closed"},
		{op: "GET /v1/quizzes/{quiz}", method: "GET", path: "/v1/quizzes/pub", wellFormed: true, status: 200},
		{then: func() { tn.clock.advance(5 * time.Millisecond) }},
		{op: "POST /v1/quizzes/{quiz}/close", method: "POST", path: "/v1/quizzes/pub/close", wellFormed: true, admin: true, status: 200},
		{then: func() { tn.clock.advance(5 * time.Millisecond) }},
		{op: "POST /v1/quizzes/{quiz}/close", method: "POST", path: "/v1/quizzes/pub/close", wellFormed: true, admin: true, status: 409, code: "poll_closed"},
		{op: "POST /v1/quizzes/{quiz}/reveal", method: "POST", path: "/v1/quizzes/pub/reveal", wellFormed: true, admin: true, status: 200},
		{op: "GET /v1/quizzes/{quiz}/leaderboard", method: "GET", path: "/v1/quizzes/pub/leaderboard?top=3&participant=p1", wellFormed: true, status: 200},
		{op: "GET /v1/quizzes/{quiz}/leaderboard", method: "GET", path: "/v1/quizzes/pub/leaderboard?top=0", status: 400, code: "invalid_request"},
		{op: "POST /v1/quizzes/{quiz}/end", method: "POST", path: "/v1/quizzes/pub/end", wellFormed: true, admin: true, status: 200},
		{op: "POST /v1/quizzes/{quiz}/start", method: "POST", path: "/v1/quizzes/pub/start", wellFormed: true, admin: true, status: 409, code: "quiz_ended"},
		{op: "GET /v1/quizzes/{quiz}/live", method: "GET", path: "/v1/quizzes/pub/live", wellFormed: true, headers: ws, status: 101},
		{op: "GET /v1/quizzes/{quiz}/live", method: "GET", path: "/v1/quizzes/pub/live", wellFormed: true, status: 426, code: "upgrade_required"},
		{op: "GET /v1/quizzes/{quiz}/live", method: "GET", path: "/v1/quizzes/nope/live", wellFormed: true, headers: ws, status: 404, code: "quiz_not_found"},

		// Sessions (no proof of work on this node: the first call issues).
		{op: "POST /v1/session", method: "POST", path: "/v1/session", wellFormed: true, status: 200},
		{op: "POST /v1/session", method: "POST", path: "/v1/session", headers: []string{"Origin", "https://evil.example"}, status: 403, code: "cross_site"},
		{op: "OPTIONS /v1/session", method: "OPTIONS", path: "/v1/session", wellFormed: true, headers: []string{"Origin", "https://partner.example", "Access-Control-Request-Method", "POST"}, status: 204},
		{op: "OPTIONS /v1/session", method: "OPTIONS", path: "/v1/session", wellFormed: true, headers: []string{"Origin", "https://evil.example", "Access-Control-Request-Method", "POST"}, status: 403, code: "cross_site"},
		{op: "POST /v1/session", method: "POST", path: "/v1/session", body: `{"challenge":"c2.bogus","nonce":"1"}`, wellFormed: true, status: 200, also: 403},
		{op: "POST /v1/session", method: "POST", path: "/v1/session", body: `[1,2]`, status: 400, code: "invalid_request"},

		// Host actions.
		{op: "POST /v1/polls/{poll}/reveal", method: "POST", path: "/v1/polls/p1/reveal", wellFormed: true, admin: true, status: 200},
		{op: "POST /v1/polls/{poll}/reveal", method: "POST", path: "/v1/polls/nope/reveal", wellFormed: true, admin: true, status: 404, code: "poll_not_found"},
		{op: "POST /v1/polls/{poll}/extend", method: "POST", path: "/v1/polls/p1/extend", body: `{"by_s":30}`, wellFormed: true, admin: true, status: 200},
		{op: "POST /v1/polls/{poll}/extend", method: "POST", path: "/v1/polls/p1/extend", body: `{"by_s":30,"closes_at":1}`, admin: true, status: 400, code: "invalid_request"},
		{op: "POST /v1/polls/{poll}/extend", method: "POST", path: "/v1/polls/p1/extend", body: `{"by_s":30}`, status: 401, code: "unauthorized"},
		{op: "POST /v1/polls/{poll}/votes", method: "POST", path: "/v1/polls/p2/votes", body: `{"option":"x","voter":"v-proof","idem":"k-proof"}`, wellFormed: true, status: 200,
			check: func(t *testing.T, raw []byte) {
				var res api.VoteResponse
				if err := json.Unmarshal(raw, &res); err != nil || len(res.Results) != 1 || res.Results[0].Receipt == nil {
					t.Fatalf("a vote's answer without its receipt: %s", raw)
				}
				leaf = res.Results[0].Receipt.Leaf
			}},
		{op: "GET /v1/polls/{poll}/proofs/{leaf}", method: "GET", path: "/v1/polls/p1/proofs/" + strings.Repeat("0", 64), wellFormed: true, status: 409, code: "not_certified"},
		{op: "POST /v1/polls/{poll}/close", method: "POST", path: "/v1/polls/p2/close", status: 401, code: "unauthorized"},
		{op: "POST /v1/polls/{poll}/close", method: "POST", path: "/v1/polls/p2/close", wellFormed: true, admin: true, status: 200},
		{then: func() { tn.clock.advance(5 * time.Millisecond) }}, // past the close (now, or opens_at + 1 ms)
		{op: "POST /v1/polls/{poll}/extend", method: "POST", path: "/v1/polls/p2/extend", body: `{"by_s":30}`, wellFormed: true, admin: true, status: 409, code: "poll_closed"},
		{op: "POST /v1/polls/{poll}/close", method: "POST", path: "/v1/polls/nope/close", wellFormed: true, admin: true, status: 404, code: "poll_not_found"},

		// Results and certification.
		{op: "GET /v1/polls/{poll}/result", method: "GET", path: "/v1/polls/p1/result", wellFormed: true, status: 200},
		{op: "GET /v1/polls/{poll}/result", method: "GET", path: "/v1/polls/nope/result", wellFormed: true, status: 404, code: "poll_not_found"},
		{op: "POST /v1/polls/{poll}/certify", method: "POST", path: "/v1/polls/p1/certify", body: `{}`, wellFormed: true, admin: true, status: 409, code: "poll_not_closed"},
		{op: "POST /v1/polls/{poll}/certify", method: "POST", path: "/v1/polls/p1/certify", body: `{"exclude":["x"]}`, admin: true, status: 400, code: "invalid_request"},
		{then: func() { tn.clock.advance(10 * time.Second) }}, // p2 closed above; past its grace
		{then: func() {
			waitFor(t, func() bool {
				return tn.call(t, "GET", "/v1/polls/p2/result", "").body["status"] == "reconciled"
			})
		}},
		{op: "GET /v1/polls/{poll}/result", method: "GET", path: "/v1/polls/p2/result", wellFormed: true, status: 200},
		{op: "POST /v1/polls/{poll}/certify", method: "POST", path: "/v1/polls/p2/certify", wellFormed: true, admin: true, status: 200},
		{op: "GET /v1/polls/{poll}/proofs/{leaf}", method: "GET", pathOf: func() string { return "/v1/polls/p2/proofs/" + leaf }, wellFormed: true, status: 200},
		{op: "GET /v1/polls/{poll}/proofs/{leaf}", method: "GET", path: "/v1/polls/p2/proofs/" + strings.Repeat("0", 64), wellFormed: true, status: 404, code: "leaf_not_found"},
		{op: "GET /v1/polls/{poll}/proofs/{leaf}", method: "GET", path: "/v1/polls/p2/proofs/not-a-leaf", wellFormed: true, status: 400, code: "invalid_request"},
		{op: "GET /v1/polls/{poll}/proofs/{leaf}", method: "GET", path: "/v1/polls/nope/proofs/" + strings.Repeat("0", 64), wellFormed: true, status: 404, code: "poll_not_found"},

		// The ledger.
		{op: "GET /v1/polls/{poll}/ledger", method: "GET", path: "/v1/polls/p1/ledger", wellFormed: true, admin: true, status: 200},
		{op: "GET /v1/polls/{poll}/ledger", method: "GET", path: "/v1/polls/p1/ledger?format=binary", wellFormed: true, admin: true, status: 200},
		{op: "GET /v1/polls/{poll}/ledger", method: "GET", path: "/v1/polls/p1/ledger", status: 401, code: "unauthorized"},

		// Live streams.
		{op: "GET /v1/polls/{poll}/live", method: "GET", path: "/v1/polls/p1/live", wellFormed: true, status: 426, code: "upgrade_required"},
		{op: "GET /v1/polls/{poll}/live", method: "GET", path: "/v1/polls/p1/live", wellFormed: true, headers: ws, status: 101},
		{op: "GET /v1/polls/{poll}/live", method: "GET", path: "/v1/polls/p1/live", wellFormed: true, headers: append(slices.Clone(ws), "Origin", "https://evil.example"), status: 403},
		{op: "GET /v1/polls/{poll}/live", method: "GET", path: "/v1/polls/nope/live", wellFormed: true, headers: ws, status: 404, code: "poll_not_found"},
		{op: "GET /v1/polls/{poll}/events", method: "GET", path: "/v1/polls/p1/events", wellFormed: true, status: 200},
		{op: "GET /v1/polls/{poll}/events", method: "GET", path: "/v1/polls/nope/events", wellFormed: true, status: 404, code: "poll_not_found"},

		// Pages and the QR code.
		{op: "GET /v1/polls/{poll}/qr.png", method: "GET", path: "/v1/polls/p1/qr.png?size=128", wellFormed: true, status: 200},
		{op: "GET /v1/polls/{poll}/qr.png", method: "GET", path: "/v1/polls/p1/qr.png?size=5", status: 400, code: "invalid_request"},
		{op: "GET /", method: "GET", path: "/", wellFormed: true, status: 200},
		{op: "GET /present/{poll}", method: "GET", path: "/present/p1", wellFormed: true, status: 200},
		{op: "GET /overlay/{poll}", method: "GET", path: "/overlay/p1", wellFormed: true, status: 200},
		{op: "GET /embed/{poll}", method: "GET", path: "/embed/p1", wellFormed: true, status: 200},
		{op: "GET /present/event/{event}", method: "GET", path: "/present/event/show-1", wellFormed: true, status: 200},
		{op: "GET /overlay/event/{event}", method: "GET", path: "/overlay/event/show-1", wellFormed: true, status: 200},
		{op: "GET /client.js", method: "GET", path: "/client.js", wellFormed: true, status: 200},

		// Operations.
		{op: "GET /v1/cluster", method: "GET", path: "/v1/cluster", wellFormed: true, status: 200},
		{op: "GET /v1/cluster/keys", method: "GET", path: "/v1/cluster/keys", wellFormed: true, status: 200},
		{op: "GET /metrics", method: "GET", path: "/metrics", wellFormed: true, status: 200},
		{op: "GET /healthz", method: "GET", path: "/healthz", wellFormed: true, status: 200},
		{op: "GET /readyz", method: "GET", path: "/readyz", wellFormed: true, status: 200},
		{op: "GET /v1/backup", method: "GET", path: "/v1/backup", wellFormed: true, admin: true, status: 200, check: func(t *testing.T, raw []byte) {
			if !bytes.Contains(raw, []byte("BACKUP.json")) {
				t.Errorf("the backup stream does not start with its manifest")
			}
		}},
		{op: "GET /v1/backup", method: "GET", path: "/v1/backup", status: 401, code: "unauthorized"},
	}
	for _, s := range steps {
		if s.op == "" {
			s.then()
			continue
		}
		if s.pathOf != nil {
			s.path = s.pathOf()
		}
		headers := s.headers
		if s.admin {
			headers = append([]string{"Authorization", "Bearer " + testToken}, headers...)
		}
		res, raw := c.do(s.op, s.method, s.path, s.body, s.wellFormed, headers...)
		if s.also != 0 && res.StatusCode == s.also {
			continue
		}
		c.want(res, raw, s.status, s.code)
		if s.check != nil {
			s.check(t, raw)
		}
	}

	// Every operation of the document was exercised, and every route the
	// node serves is in the document.
	for op := range c.ops {
		if !c.seen[op] {
			t.Errorf("docs/openapi.yaml's %s was not exercised", op)
		}
	}
	tn.m.http.mu.Lock()
	routes := slices.Clone(tn.m.http.routes)
	tn.m.http.mu.Unlock()
	for _, r := range routes {
		if r == "/" || r == "/v1/" || strings.HasPrefix(r, "/debug/") {
			continue // the page's files and the 404 catch-all; pprof is not API
		}
		if !c.ops[r] {
			t.Errorf("the node serves %s, which docs/openapi.yaml does not describe", r)
		}
	}
}
