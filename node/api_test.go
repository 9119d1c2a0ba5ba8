package node

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The node tests' vote helpers: vote is a request's body, castVote sends
// one and returns its answer, tn.vote sends a new one that must count.

func vote(option, voter, idem string) string {
	return fmt.Sprintf(`{"option":%q,"voter":%q,"idem":%q}`, option, voter, idem)
}

// castVote sends one vote and returns its status and vote id (empty for
// a rejected vote); a request refused whole fails the test.
func (tn *testNode) castVote(t testing.TB, poll, option, voter, idem string) (status, id string) {
	t.Helper()
	r := tn.call(t, "POST", "/v1/polls/"+poll+"/votes", vote(option, voter, idem))
	// A 504 (the copy on a second machine not confirmed in time: a busy
	// machine) is retried with the same key, as the client contract says;
	// the retry's "duplicate" is then the first answer this key gets.
	unknown := false
	for deadline := time.Now().Add(30 * time.Second); r.status == http.StatusGatewayTimeout && time.Now().Before(deadline); {
		unknown = true
		time.Sleep(200 * time.Millisecond)
		r = tn.call(t, "POST", "/v1/polls/"+poll+"/votes", vote(option, voter, idem))
	}
	if r.status != http.StatusOK {
		t.Fatalf("vote at %s: %d %s", tn.replica, r.status, r.raw)
	}
	res := r.body["results"].([]any)[0].(map[string]any)
	id, _ = res["vote_id"].(string)
	status = res["status"].(string)
	if unknown && status == "duplicate" {
		status = "accepted"
	}
	return status, id
}

// vote sends a new vote (a fresh idempotency key) that must be accepted.
func (tn *testNode) vote(t testing.TB, poll, option, voter string) {
	t.Helper()
	if s, _ := tn.castVote(t, poll, option, voter, fmt.Sprintf("%s-%s-%d", voter, option, time.Now().UnixNano())); s != "accepted" {
		t.Fatalf("vote at %s by %s: %s, want accepted", tn.replica, voter, s)
	}
}

func result(t *testing.T, r response, i int) map[string]any {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("vote: %d %s", r.status, r.raw)
	}
	return r.body["results"].([]any)[i].(map[string]any)
}

func TestVoteLifecycle(t *testing.T) {
	tn := startNode(t, t.TempDir(), nil)
	tn.createPoll(t, "p")

	first := result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("a", "alice", "k1")), 0)
	if first["status"] != "accepted" || first["vote_id"] == "" {
		t.Fatalf("first vote: %v", first)
	}
	retry := result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("a", "alice", "k1")), 0)
	if retry["status"] != "duplicate" || retry["vote_id"] != first["vote_id"] {
		t.Fatalf("retry: %v", retry)
	}
	// A retry carrying a different option is still the first vote.
	result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("b", "alice", "k1")), 0)
	if got := tn.totals(t, "p"); got["a"] != 1 || got["_total"] != 1 {
		t.Fatalf("after retries: %v", got)
	}

	// Alice changes her mind: the vote moves.
	tn.clock.advance(time.Second)
	result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("b", "alice", "k2")), 0)
	if got := tn.totals(t, "p"); got["a"] != 0 || got["b"] != 1 || got["_total"] != 1 {
		t.Fatalf("after change: %v", got)
	}
	// The same option again changes nothing.
	tn.clock.advance(time.Second)
	result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("b", "alice", "k3")), 0)
	if got := tn.totals(t, "p"); got["b"] != 1 || got["_total"] != 1 {
		t.Fatalf("after same option: %v", got)
	}

	// A batch.
	batch := `{"votes":[` + vote("a", "bob", "k4") + "," + vote("c", "carol", "k5") + "," + vote("c", "dave", "k6") + `]}`
	r := tn.call(t, "POST", "/v1/polls/p/votes", batch)
	for i := range 3 {
		if s := result(t, r, i)["status"]; s != "accepted" {
			t.Fatalf("batch vote %d: %v", i, s)
		}
	}
	if got := tn.totals(t, "p"); got["a"] != 1 || got["b"] != 1 || got["c"] != 2 || got["_total"] != 4 {
		t.Fatalf("after batch: %v", got)
	}

	// Past the close, within grace: ledgered as late, not counted.
	tn.clock.advance(60 * time.Second)
	late := result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("a", "erin", "k7")), 0)
	if late["status"] != "late" {
		t.Fatalf("late vote: %v", late)
	}
	if got := tn.totals(t, "p"); got["_total"] != 4 {
		t.Fatalf("a late vote was counted: %v", got)
	}
	if s := tn.call(t, "GET", "/v1/polls/p", "").body["status"]; s != "closed" {
		t.Fatalf("status = %v", s)
	}
	// After grace: refused.
	tn.clock.advance(10 * time.Second)
	if r := tn.call(t, "POST", "/v1/polls/p/votes", vote("a", "frank", "k8")); r.status != 409 || r.code() != "poll_closed" {
		t.Fatalf("after grace: %d %s", r.status, r.raw)
	}
	// A retry of an acknowledged vote is still answered after the close.
	if r := result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("a", "alice", "k1")), 0); r["status"] != "duplicate" {
		t.Fatalf("retry after close: %v", r)
	}

	// A poll that opens later refuses votes until then.
	opens := tn.clock.now().Add(time.Hour).UnixMilli()
	r = tn.admin(t, "POST", "/v1/polls", fmt.Sprintf(`{"id":"later","question":"Q?","options":[{"id":"x","label":"X"},{"id":"y","label":"Y"}],"opens_at":%d}`, opens))
	if r.status != 201 || r.body["status"] != "scheduled" {
		t.Fatalf("scheduled poll: %d %s", r.status, r.raw)
	}
	if r := tn.call(t, "POST", "/v1/polls/later/votes", vote("x", "gina", "k9")); r.status != 409 || r.code() != "poll_not_open" {
		t.Fatalf("before open: %d %s", r.status, r.raw)
	}

	// Close now.
	tn.createPoll(t, "q")
	tn.clock.advance(time.Second)
	if r := tn.admin(t, "POST", "/v1/polls/q/close", ""); r.status != 200 || r.body["closes_at"] != float64(tn.clock.ms.Load()+1) {
		t.Fatalf("close: %d %s, want it to close the millisecond after now", r.status, r.raw)
	}
	tn.closeTakesEffect(t, "q")
	if r := tn.call(t, "GET", "/v1/polls/q", ""); r.body["status"] != "closed" {
		t.Fatalf("after the close: %s", r.raw)
	}
	if r := tn.call(t, "POST", "/v1/polls/q/votes", vote("a", "hank", "k10")); r.body["results"].([]any)[0].(map[string]any)["status"] != "late" {
		t.Fatalf("vote right after close now: %s", r.raw)
	}
	if r := tn.call(t, "GET", "/v1/polls", ""); len(r.body["polls"].([]any)) != 3 {
		t.Fatalf("list: %s", r.raw)
	}
	// The admin export streams the poll's close line, this node's
	// records, then its signed head.
	r = tn.admin(t, "GET", "/v1/polls/p/ledger", "")
	lines := strings.Split(strings.TrimSuffix(r.raw, "\n"), "\n")
	if r.status != 200 || len(lines) != 9 || !strings.HasPrefix(lines[0], `{"close":{"poll":"p","closes_at":`) || !strings.HasPrefix(lines[8], `{"signed_head":`) {
		t.Fatalf("ledger export: %d, %d lines", r.status, len(lines))
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	tn := startNode(t, t.TempDir(), func(c *Config) { c.Limits.MaxBody = 4096 })
	tn.createPoll(t, "p")
	votes := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = vote("a", fmt.Sprint("v", i), fmt.Sprint("k", i))
		}
		return `{"votes":[` + strings.Join(parts, ",") + `]}`
	}
	long := strings.Repeat("x", 200)
	cases := []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		code                     string
	}{
		{"not json", "POST", "/v1/polls/p/votes", "hello", nil, 400, "invalid_request"},
		{"truncated json", "POST", "/v1/polls/p/votes", `{"option":"a","voter":"v"`, nil, 400, "invalid_request"},
		{"unknown field", "POST", "/v1/polls/p/votes", `{"option":"a","voter":"v","idem":"k","admin":true}`, nil, 400, "invalid_request"},
		{"two values", "POST", "/v1/polls/p/votes", vote("a", "v", "k") + vote("a", "v", "k"), nil, 400, "invalid_request"},
		{"too large", "POST", "/v1/polls/p/votes", `{"option":"` + strings.Repeat("a", 5000) + `"}`, nil, 413, "too_large"},
		{"batch of 11", "POST", "/v1/polls/p/votes", votes(11), nil, 400, "invalid_request"},
		{"empty batch", "POST", "/v1/polls/p/votes", `{"votes":[]}`, nil, 400, "invalid_request"},
		{"batch and single", "POST", "/v1/polls/p/votes", `{"option":"a","votes":[` + vote("a", "v", "k") + `]}`, nil, 400, "invalid_request"},
		{"missing voter", "POST", "/v1/polls/p/votes", `{"option":"a","idem":"k"}`, nil, 400, "invalid_request"},
		{"missing idem", "POST", "/v1/polls/p/votes", `{"option":"a","voter":"v"}`, nil, 400, "invalid_request"},
		{"missing option", "POST", "/v1/polls/p/votes", `{"voter":"v","idem":"k"}`, nil, 400, "invalid_request"},
		{"long voter", "POST", "/v1/polls/p/votes", vote("a", long, "k"), nil, 400, "invalid_request"},
		{"long idem", "POST", "/v1/polls/p/votes", vote("a", "v", long), nil, 400, "invalid_request"},
		{"long option", "POST", "/v1/polls/p/votes", vote(long[:100], "v", "k"), nil, 400, "invalid_request"},
		{"control char in voter", "POST", "/v1/polls/p/votes", `{"option":"a","voter":"v\u0000","idem":"k"}`, nil, 400, "invalid_request"},
		{"invalid utf-8", "POST", "/v1/polls/p/votes", "{\"option\":\"a\",\"voter\":\"\xff\xfe\",\"idem\":\"k\"}", nil, 400, "invalid_request"},
		{"unknown option", "POST", "/v1/polls/p/votes", vote("zz", "v", "k"), nil, 422, "invalid_option"},
		{"unknown option in batch", "POST", "/v1/polls/p/votes", `{"votes":[` + vote("a", "v", "k") + "," + vote("zz", "w", "k2") + `]}`, nil, 422, "invalid_option"},
		{"unknown poll", "POST", "/v1/polls/nope/votes", vote("a", "v", "k"), nil, 404, "poll_not_found"},
		{"unknown poll get", "GET", "/v1/polls/nope", "", nil, 404, "poll_not_found"},
		{"wrong content type", "POST", "/v1/polls/p/votes", vote("a", "v", "k"), []string{"Content-Type", "text/plain"}, 415, "invalid_request"},
		{"create without token", "POST", "/v1/polls", `{"question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]}`, nil, 401, "unauthorized"},
		{"create with wrong token", "POST", "/v1/polls", `{"question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]}`, []string{"Authorization", "Bearer nope"}, 401, "unauthorized"},
		{"close without token", "POST", "/v1/polls/p/close", "", nil, 401, "unauthorized"},
		{"ledger without token", "GET", "/v1/polls/p/ledger", "", nil, 401, "unauthorized"},
		{"duplicate option ids", "POST", "/v1/polls", `{"question":"Q?","options":[{"id":"a","label":"A"},{"id":"a","label":"B"}]}`, []string{"Authorization", "Bearer " + testToken}, 400, "invalid_request"},
		{"zero options", "POST", "/v1/polls", `{"question":"Q?","options":[]}`, []string{"Authorization", "Bearer " + testToken}, 400, "invalid_request"},
		{"too many options", "POST", "/v1/polls", manyOptions(33), []string{"Authorization", "Bearer " + testToken}, 400, "invalid_request"},
		{"closes before opens", "POST", "/v1/polls", `{"question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"opens_at":2000000000000,"closes_at":1900000000000}`, []string{"Authorization", "Bearer " + testToken}, 400, "invalid_request"},
		{"existing poll id", "POST", "/v1/polls", `{"id":"p","question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]}`, []string{"Authorization", "Bearer " + testToken}, 409, "invalid_request"},
		{"unknown endpoint", "GET", "/v1/nothing", "", nil, 404, "not_found"},
		{"wrong method", "DELETE", "/v1/polls/p", "", nil, 405, "invalid_request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := tn.call(t, c.method, c.path, c.body, c.headers...)
			if r.status != c.status || r.code() != c.code {
				t.Fatalf("got %d %q, want %d %q: %s", r.status, r.code(), c.status, c.code, r.raw)
			}
		})
	}
	if got := tn.totals(t, "p"); got["_total"] != 0 {
		t.Fatalf("bad input changed the tally: %v", got)
	}
	if st := tn.Ledger().Stats(); st.Appended != 0 {
		t.Fatalf("bad input reached the ledger: %+v", st)
	}
	if r := tn.call(t, "GET", "/v1/polls", ""); len(r.body["polls"].([]any)) != 1 {
		t.Fatalf("bad input created a poll: %s", r.raw)
	}
}

func manyOptions(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"id":"o%d","label":"O%d"}`, i, i)
	}
	return `{"question":"Q?","options":[` + strings.Join(parts, ",") + `]}`
}

func TestRateLimits(t *testing.T) {
	tn := startNode(t, t.TempDir(), func(c *Config) {
		c.Limits.IPRate, c.Limits.IPBurst = 1, 3
		c.Limits.VoterRate, c.Limits.VoterBurst = 1, 2
	})
	tn.createPoll(t, "p")
	// The voter bucket empties first.
	for i := range 2 {
		result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("a", "alice", fmt.Sprint("a", i))), 0)
	}
	r := tn.call(t, "POST", "/v1/polls/p/votes", vote("a", "alice", "a2"))
	if r.status != 429 || r.code() != "rate_limited" || r.header.Get("Retry-After") == "" {
		t.Fatalf("voter limit: %d %s %v", r.status, r.raw, r.header)
	}
	// Retries cost nothing.
	if s := result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("a", "alice", "a0")), 0)["status"]; s != "duplicate" {
		t.Fatalf("retry under limit: %v", s)
	}
	// The address bucket: one token left of 3.
	result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("b", "bob", "b0")), 0)
	if r := tn.call(t, "POST", "/v1/polls/p/votes", vote("b", "carol", "c0")); r.status != 429 {
		t.Fatalf("ip limit: %d %s", r.status, r.raw)
	}
	if got := tn.totals(t, "p"); got["_total"] != 2 {
		t.Fatalf("refused votes were counted: %v", got)
	}
	// Tokens come back with time.
	tn.clock.advance(3 * time.Second)
	result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("c", "carol", "c1")), 0)
}

// TestRetriesAnswerTheFirstVoteID: a retry gets the vote id of its first
// answer; the key reused under another voter's name is refused with
// idem_conflict and changes nothing (a key belongs to its voter).
func TestRetriesAnswerTheFirstVoteID(t *testing.T) {
	tn := startNode(t, t.TempDir(), nil)
	tn.createPoll(t, "p")
	ids := map[string]any{}
	for i := range 6 {
		r := result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("a", fmt.Sprint("v", i), fmt.Sprint("k", i))), 0)
		ids[fmt.Sprint("k", i)] = r["vote_id"]
	}
	for i := range 6 {
		k := fmt.Sprint("k", i)
		if r := result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("b", fmt.Sprint("v", i), k)), 0); r["status"] != "duplicate" || r["vote_id"] != ids[k] {
			t.Fatalf("retry of %s: %v", k, r)
		}
		if r := result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("b", "mallory", k)), 0); r["status"] != "rejected" || r["error"] != "idem_conflict" || r["vote_id"] != nil {
			t.Fatalf("%s reused by another voter: %v", k, r)
		}
	}
	if got := tn.totals(t, "p"); got["a"] != 6 || got["_total"] != 6 {
		t.Fatalf("totals %v", got)
	}
}

// TestAWrongMethodIs405: a path under /v1 that exists with other methods
// answers 405 with Allow, in the JSON error shape; one that does not, 404.
func TestAWrongMethodIs405(t *testing.T) {
	tn := startNode(t, t.TempDir(), nil)
	tn.createPoll(t, "p")
	for _, c := range []struct {
		method, path string
		status       int
		allow, code  string
	}{
		{"DELETE", "/v1/polls/p", http.StatusMethodNotAllowed, "GET, HEAD", "invalid_request"},
		{"PUT", "/v1/polls", http.StatusMethodNotAllowed, "GET, HEAD, POST", "invalid_request"},
		{"GET", "/v1/polls/p/votes", http.StatusMethodNotAllowed, "POST", "invalid_request"},
		{"GET", "/v1/nothing", http.StatusNotFound, "", "not_found"},
	} {
		r := tn.call(t, c.method, c.path, "")
		e, _ := r.body["error"].(map[string]any)
		if r.status != c.status || r.header.Get("Allow") != c.allow || e["code"] != c.code {
			t.Errorf("%s %s: %d Allow %q %s", c.method, c.path, r.status, r.header.Get("Allow"), r.raw)
		}
	}
}
