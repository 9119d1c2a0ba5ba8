package node

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"go.yaml.in/yaml/v3"
)

// contract validates a running node's answers against docs/openapi.yaml
// and records which operations were exercised.
type contract struct {
	t    *testing.T
	tn   *testNode
	v    validator.Validator
	seen map[string]bool // "GET /v1/polls/{poll}" of the document
	ops  map[string]bool // every operation in the document
}

func newContract(t *testing.T, tn *testNode) *contract {
	b, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(b)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("docs/openapi.yaml: %s", e.Error())
		}
		t.FailNow()
	}
	var raw struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	c := &contract{t: t, tn: tn, v: v, seen: map[string]bool{}, ops: map[string]bool{}}
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
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := c.tn.client.Do(req)
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
	var ok bool
	var verrs []*verrors.ValidationError
	if wellFormed {
		ok, verrs = c.v.ValidateHttpRequestResponse(vreq, res)
	} else {
		ok, verrs = c.v.ValidateHttpResponse(vreq, res)
	}
	if !ok {
		for _, e := range verrs {
			c.t.Errorf("%s %s → %d %s: %s (%s)", method, path, res.StatusCode, truncate(raw), e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				c.t.Errorf("   %s: %s", se.FieldPath, se.Reason)
			}
		}
	}
	res.Body = io.NopCloser(bytes.NewReader(raw))
	return res, raw
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
		c.t.Errorf("got %d %s, want %d %s", res.StatusCode, truncate(raw), status, code)
	}
}

// TestOpenAPIContract drives a running node through every endpoint of
// docs/openapi.yaml, the error cases included, and validates every
// request and answer against the document. Every operation of the
// document is exercised, and every route the node serves is in it.
func TestOpenAPIContract(t *testing.T) {
	tn := startNode(t, t.TempDir(), func(c *Config) { c.PowBits = 0 })
	c := newContract(t, tn)
	auth := []string{"Authorization", "Bearer " + testToken}
	adm := func(op, method, path, body string, wellFormed bool) (*http.Response, []byte) {
		return c.do(op, method, path, body, wellFormed, auth...)
	}

	// Polls.
	res, raw := adm("POST /v1/polls", "POST", "/v1/polls", `{"id":"p1","question":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":60,"grace_s":1,"event":"show","hidden":true,"limits":{"ip_rate":100}}`, true)
	c.want(res, raw, 201, "")
	res, raw = adm("POST /v1/polls", "POST", "/v1/polls", `{"id":"p1","question":"Again?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]}`, true)
	c.want(res, raw, 409, "invalid_request")
	res, raw = adm("POST /v1/polls", "POST", "/v1/polls", `{"question":"One?","options":[{"id":"a","label":"A"}]}`, false)
	c.want(res, raw, 400, "invalid_request")
	res, raw = adm("POST /v1/polls", "POST", "/v1/polls", `{"question":`, false)
	c.want(res, raw, 400, "invalid_request")
	res, raw = adm("POST /v1/polls", "POST", "/v1/polls", `{"question":"`+strings.Repeat("x", 70_000)+`"}`, false)
	c.want(res, raw, 413, "too_large")
	res, raw = c.do("POST /v1/polls", "POST", "/v1/polls", `{"question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]}`, false)
	c.want(res, raw, 401, "unauthorized")
	res, raw = adm("POST /v1/polls", "POST", "/v1/polls", `{"id":"p2","question":"Other?","options":[{"id":"x","label":"X"},{"id":"y","label":"Y"}],"duration_s":60,"grace_s":1}`, true)
	c.want(res, raw, 201, "")

	res, raw = c.do("GET /v1/polls", "GET", "/v1/polls?limit=1", "", true)
	c.want(res, raw, 200, "")
	res, raw = c.do("GET /v1/polls", "GET", "/v1/polls?event=show", "", true)
	c.want(res, raw, 200, "")
	res, raw = c.do("GET /v1/polls", "GET", "/v1/polls?limit=0", "", false)
	c.want(res, raw, 400, "invalid_request")
	res, raw = c.do("GET /v1/polls", "GET", "/v1/polls?cursor=%%%", "", false)
	c.want(res, raw, 400, "invalid_request")
	res, raw = c.do("GET /v1/polls/{poll}", "GET", "/v1/polls/p1", "", true)
	c.want(res, raw, 200, "")
	if bytes.Contains(raw, []byte("totals")) {
		t.Errorf("a hidden poll's public view has counts: %s", raw)
	}
	res, raw = adm("GET /v1/polls/{poll}", "GET", "/v1/polls/p1", "", true)
	c.want(res, raw, 200, "")
	res, raw = c.do("GET /v1/polls/{poll}", "GET", "/v1/polls/p1", "", false, "Authorization", "Bearer wrong")
	c.want(res, raw, 401, "unauthorized")
	res, raw = c.do("GET /v1/polls/{poll}", "GET", "/v1/polls/nope", "", true)
	c.want(res, raw, 404, "poll_not_found")

	// Votes.
	res, raw = c.do("POST /v1/polls/{poll}/votes", "POST", "/v1/polls/p1/votes", `{"option":"a","voter":"v1","idem":"k1"}`, true)
	c.want(res, raw, 200, "")
	res, raw = c.do("POST /v1/polls/{poll}/votes", "POST", "/v1/polls/p1/votes", `{"votes":[{"option":"a","voter":"v1","idem":"k1"},{"option":"b","voter":"v2","idem":"k2"}]}`, true)
	c.want(res, raw, 200, "")
	res, raw = c.do("POST /v1/polls/{poll}/votes", "POST", "/v1/polls/p1/votes", `{"option":"z","voter":"v3","idem":"k3"}`, true)
	c.want(res, raw, 422, "invalid_option")
	res, raw = c.do("POST /v1/polls/{poll}/votes", "POST", "/v1/polls/p1/votes", `{"votes":[]}`, false)
	c.want(res, raw, 400, "invalid_request")
	res, raw = c.do("POST /v1/polls/{poll}/votes", "POST", "/v1/polls/nope/votes", `{"option":"a","voter":"v1","idem":"k9"}`, true)
	c.want(res, raw, 404, "poll_not_found")
	res, raw = c.do("POST /v1/polls/{poll}/votes", "POST", "/v1/polls/p1/votes", `{"option":"a","voter":"v4","idem":"k4"}`, false, "Content-Type", "text/plain")
	c.want(res, raw, 415, "invalid_request")
	res, raw = c.do("POST /v1/polls/{poll}/votes", "POST", "/v1/polls/p1/votes", `{"option":"a","voter":"v5","idem":"k5"}`, true, "Tally-Session", "s1.forged")
	c.want(res, raw, 401, "session_invalid")

	// A quiz question: an answer timed by the node, a second one refused.
	res, raw = adm("POST /v1/polls", "POST", "/v1/polls", quizQuestion, true)
	c.want(res, raw, 201, "")
	res, raw = c.do("GET /v1/polls/{poll}", "GET", "/v1/polls/q1-0", "", true)
	c.want(res, raw, 200, "")
	res, raw = c.do("POST /v1/polls/{poll}/votes", "POST", "/v1/polls/q1-0/votes", `{"option":"b","voter":"p1","idem":"qa1","name":"Ann"}`, true)
	c.want(res, raw, 200, "")
	res, raw = c.do("POST /v1/polls/{poll}/votes", "POST", "/v1/polls/q1-0/votes", `{"option":"a","voter":"p1","idem":"qa2"}`, true)
	c.want(res, raw, 409, "already_answered")

	// A quiz: created, started, answered, closed, revealed, ranked, ended.
	res, raw = adm("POST /v1/quizzes", "POST", "/v1/quizzes", pubQuiz, true)
	c.want(res, raw, 201, "")
	res, raw = adm("POST /v1/quizzes", "POST", "/v1/quizzes", `{"id":"bad","questions":[]}`, false)
	c.want(res, raw, 400, "invalid_request")
	res, raw = c.do("GET /v1/quizzes/{quiz}", "GET", "/v1/quizzes/pub", "", true)
	c.want(res, raw, 200, "")
	res, raw = c.do("GET /v1/quizzes/{quiz}", "GET", "/v1/quizzes/nope", "", true)
	c.want(res, raw, 404, "quiz_not_found")
	res, raw = c.do("POST /v1/quizzes/{quiz}/start", "POST", "/v1/quizzes/pub/start", "", false)
	c.want(res, raw, 401, "unauthorized")
	res, raw = adm("POST /v1/quizzes/{quiz}/reveal", "POST", "/v1/quizzes/pub/reveal", "", true)
	c.want(res, raw, 409, "poll_not_open")
	res, raw = adm("POST /v1/quizzes/{quiz}/start", "POST", "/v1/quizzes/pub/start", "", true)
	c.want(res, raw, 200, "")
	res, raw = adm("POST /v1/quizzes/{quiz}/start", "POST", "/v1/quizzes/pub/start", "", true)
	c.want(res, raw, 409, "poll_not_closed")
	res, raw = c.do("GET /v1/quizzes/{quiz}", "GET", "/v1/quizzes/pub", "", true)
	c.want(res, raw, 200, "")
	tn.clock.advance(5 * time.Millisecond)
	res, raw = adm("POST /v1/quizzes/{quiz}/close", "POST", "/v1/quizzes/pub/close", "", true)
	c.want(res, raw, 200, "")
	tn.clock.advance(5 * time.Millisecond)
	res, raw = adm("POST /v1/quizzes/{quiz}/close", "POST", "/v1/quizzes/pub/close", "", true)
	c.want(res, raw, 409, "poll_closed")
	res, raw = adm("POST /v1/quizzes/{quiz}/reveal", "POST", "/v1/quizzes/pub/reveal", "", true)
	c.want(res, raw, 200, "")
	res, raw = c.do("GET /v1/quizzes/{quiz}/leaderboard", "GET", "/v1/quizzes/pub/leaderboard?top=3&participant=p1", "", true)
	c.want(res, raw, 200, "")
	res, raw = c.do("GET /v1/quizzes/{quiz}/leaderboard", "GET", "/v1/quizzes/pub/leaderboard?top=0", "", false)
	c.want(res, raw, 400, "invalid_request")
	res, raw = adm("POST /v1/quizzes/{quiz}/end", "POST", "/v1/quizzes/pub/end", "", true)
	c.want(res, raw, 200, "")
	res, raw = adm("POST /v1/quizzes/{quiz}/start", "POST", "/v1/quizzes/pub/start", "", true)
	c.want(res, raw, 409, "quiz_ended")
	ws := []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}
	res, raw = c.do("GET /v1/quizzes/{quiz}/live", "GET", "/v1/quizzes/pub/live", "", true, ws...)
	c.want(res, raw, 101, "")
	res, raw = c.do("GET /v1/quizzes/{quiz}/live", "GET", "/v1/quizzes/pub/live", "", true)
	c.want(res, raw, 426, "upgrade_required")
	res, raw = c.do("GET /v1/quizzes/{quiz}/live", "GET", "/v1/quizzes/nope/live", "", true, ws...)
	c.want(res, raw, 404, "quiz_not_found")

	// Sessions (no proof of work on this node: the first call issues).
	res, raw = c.do("POST /v1/session", "POST", "/v1/session", "", true)
	c.want(res, raw, 200, "")
	res, raw = c.do("POST /v1/session", "POST", "/v1/session", `{"challenge":"c2.bogus","nonce":"1"}`, true)
	if res.StatusCode != 200 && res.StatusCode != 403 {
		t.Errorf("session with a bogus challenge: %d %s", res.StatusCode, raw)
	}
	res, raw = c.do("POST /v1/session", "POST", "/v1/session", `[1,2]`, false)
	c.want(res, raw, 400, "invalid_request")

	// Host actions.
	res, raw = adm("POST /v1/polls/{poll}/reveal", "POST", "/v1/polls/p1/reveal", "", true)
	c.want(res, raw, 200, "")
	res, raw = adm("POST /v1/polls/{poll}/reveal", "POST", "/v1/polls/nope/reveal", "", true)
	c.want(res, raw, 404, "poll_not_found")
	res, raw = adm("POST /v1/polls/{poll}/extend", "POST", "/v1/polls/p1/extend", `{"by_s":30}`, true)
	c.want(res, raw, 200, "")
	res, raw = adm("POST /v1/polls/{poll}/extend", "POST", "/v1/polls/p1/extend", `{"by_s":30,"closes_at":1}`, false)
	c.want(res, raw, 400, "invalid_request")
	res, raw = c.do("POST /v1/polls/{poll}/extend", "POST", "/v1/polls/p1/extend", `{"by_s":30}`, false)
	c.want(res, raw, 401, "unauthorized")
	res, raw = c.do("POST /v1/polls/{poll}/close", "POST", "/v1/polls/p2/close", "", false)
	c.want(res, raw, 401, "unauthorized")
	res, raw = adm("POST /v1/polls/{poll}/close", "POST", "/v1/polls/p2/close", "", true)
	c.want(res, raw, 200, "")
	tn.clock.advance(5 * time.Millisecond) // past the close (now, or opens_at + 1 ms)
	res, raw = adm("POST /v1/polls/{poll}/extend", "POST", "/v1/polls/p2/extend", `{"by_s":30}`, true)
	c.want(res, raw, 409, "poll_closed")
	res, raw = adm("POST /v1/polls/{poll}/close", "POST", "/v1/polls/nope/close", "", true)
	c.want(res, raw, 404, "poll_not_found")

	// Results and certification.
	res, raw = c.do("GET /v1/polls/{poll}/result", "GET", "/v1/polls/p1/result", "", true)
	c.want(res, raw, 200, "")
	res, raw = c.do("GET /v1/polls/{poll}/result", "GET", "/v1/polls/nope/result", "", true)
	c.want(res, raw, 404, "poll_not_found")
	res, raw = adm("POST /v1/polls/{poll}/certify", "POST", "/v1/polls/p1/certify", `{}`, true)
	c.want(res, raw, 409, "poll_not_closed")
	res, raw = adm("POST /v1/polls/{poll}/certify", "POST", "/v1/polls/p1/certify", `{"exclude":["x"]}`, false)
	c.want(res, raw, 400, "invalid_request")
	tn.clock.advance(10 * time.Second) // p2 closed above; past its grace
	waitFor(t, func() bool {
		return tn.call(t, "GET", "/v1/polls/p2/result", "").body["status"] == "reconciled"
	})
	res, raw = c.do("GET /v1/polls/{poll}/result", "GET", "/v1/polls/p2/result", "", true)
	c.want(res, raw, 200, "")
	res, raw = adm("POST /v1/polls/{poll}/certify", "POST", "/v1/polls/p2/certify", "", true)
	c.want(res, raw, 200, "")

	// The ledger.
	res, raw = adm("GET /v1/polls/{poll}/ledger", "GET", "/v1/polls/p1/ledger", "", true)
	c.want(res, raw, 200, "")
	res, raw = adm("GET /v1/polls/{poll}/ledger", "GET", "/v1/polls/p1/ledger?format=binary", "", true)
	c.want(res, raw, 200, "")
	res, raw = c.do("GET /v1/polls/{poll}/ledger", "GET", "/v1/polls/p1/ledger", "", false)
	c.want(res, raw, 401, "unauthorized")

	// Live streams.
	res, raw = c.do("GET /v1/polls/{poll}/live", "GET", "/v1/polls/p1/live", "", true)
	c.want(res, raw, 426, "upgrade_required")
	res, raw = c.do("GET /v1/polls/{poll}/live", "GET", "/v1/polls/p1/live", "", true,
		"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	c.want(res, raw, 101, "")
	res, raw = c.do("GET /v1/polls/{poll}/live", "GET", "/v1/polls/p1/live", "", true,
		"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==", "Origin", "https://evil.example")
	c.want(res, raw, 403, "")
	res, raw = c.do("GET /v1/polls/{poll}/live", "GET", "/v1/polls/nope/live", "", true,
		"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	c.want(res, raw, 404, "poll_not_found")
	res, raw = c.do("GET /v1/polls/{poll}/events", "GET", "/v1/polls/p1/events", "", true)
	c.want(res, raw, 200, "")
	res, raw = c.do("GET /v1/polls/{poll}/events", "GET", "/v1/polls/nope/events", "", true)
	c.want(res, raw, 404, "poll_not_found")

	// Pages and the QR code.
	res, raw = c.do("GET /v1/polls/{poll}/qr.png", "GET", "/v1/polls/p1/qr.png?size=128", "", true)
	c.want(res, raw, 200, "")
	res, raw = c.do("GET /v1/polls/{poll}/qr.png", "GET", "/v1/polls/p1/qr.png?size=5", "", false)
	c.want(res, raw, 400, "invalid_request")
	for _, p := range []string{"/", "/present/{poll}", "/overlay/{poll}", "/embed/{poll}"} {
		res, raw = c.do("GET "+p, "GET", strings.ReplaceAll(p, "{poll}", "p1"), "", true)
		c.want(res, raw, 200, "")
	}

	// Operations.
	res, raw = c.do("GET /v1/cluster", "GET", "/v1/cluster", "", true)
	c.want(res, raw, 200, "")
	res, raw = c.do("GET /metrics", "GET", "/metrics", "", true)
	c.want(res, raw, 200, "")
	res, raw = c.do("GET /healthz", "GET", "/healthz", "", true)
	c.want(res, raw, 200, "")
	res, raw = c.do("GET /readyz", "GET", "/readyz", "", true)
	c.want(res, raw, 200, "")
	res, raw = adm("GET /v1/backup", "GET", "/v1/backup", "", true)
	c.want(res, raw, 200, "")
	if !bytes.Contains(raw, []byte("BACKUP.json")) {
		t.Errorf("the backup stream does not start with its manifest")
	}
	res, raw = c.do("GET /v1/backup", "GET", "/v1/backup", "", false)
	c.want(res, raw, 401, "unauthorized")

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
