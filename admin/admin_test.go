package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"go.uber.org/goleak"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
	"tally/poll"
	"tally/state"
)

// TestMain fails the package's tests when any goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a wall clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// rig is a Host over a real state and ledger (in memory) with its routes.
type rig struct {
	t      *testing.T
	clock  *fakeClock
	state  *state.State
	ledger *ledger.Ledger
	mux    *http.ServeMux
}

func newRig(t *testing.T) *rig {
	t.Helper()
	l, err := ledger.Open(ledger.Config{Dir: "l", FS: vfs.NewMem(), Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	st, err := state.New(state.Config{Replica: "eu-1", Store: l})
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{t: time.UnixMilli(1_800_000_000_000)}
	hc, err := hlc.New(hlc.Config{Replica: "eu-1", Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{State: st, Clock: hc, Ledger: l, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/polls", h.HandleCreatePoll)
	mux.HandleFunc("GET /v1/polls", h.HandleListPolls)
	mux.HandleFunc("GET /v1/polls/{poll}", h.HandleGetPoll)
	mux.HandleFunc("POST /v1/polls/{poll}/close", h.HandleClosePoll)
	mux.HandleFunc("POST /v1/polls/{poll}/extend", h.HandleExtend)
	mux.HandleFunc("POST /v1/polls/{poll}/reveal", h.HandleReveal)
	mux.HandleFunc("GET /v1/polls/{poll}/ledger", h.HandleLedger)
	mux.HandleFunc("POST /v1/quizzes", h.HandleCreateQuiz)
	mux.HandleFunc("GET /v1/quizzes/{quiz}", h.HandleGetQuiz)
	mux.HandleFunc("POST /v1/quizzes/{quiz}/start", h.HandleQuizStart)
	mux.HandleFunc("POST /v1/quizzes/{quiz}/close", h.HandleQuizClose)
	mux.HandleFunc("POST /v1/quizzes/{quiz}/reveal", h.HandleQuizReveal)
	mux.HandleFunc("POST /v1/quizzes/{quiz}/end", h.HandleQuizEnd)
	return &rig{t: t, clock: clk, state: st, ledger: l, mux: mux}
}

// do sends a request and returns the status and the decoded body.
func (r *rig) do(method, path, body string) (int, map[string]any) {
	r.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" || method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json") // as every client does
	}
	w := httptest.NewRecorder()
	r.mux.ServeHTTP(w, req)
	out := map[string]any{}
	if ct := w.Header().Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			r.t.Fatalf("%s %s: %v: %s", method, path, err, w.Body)
		}
	}
	return w.Code, out
}

func code(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func (r *rig) mustCreate(body string) {
	r.t.Helper()
	if st, b := r.do("POST", "/v1/polls", body); st != http.StatusCreated {
		r.t.Fatalf("create %s: %d %v", body, st, b)
	}
}

func TestCreatePollRefusesBadInputAndChangesNothing(t *testing.T) {
	r := newRig(t)
	cases := []struct {
		name, body string
		status     int
	}{
		{"empty", ``, http.StatusBadRequest},
		{"not json", `{"question":`, http.StatusBadRequest},
		{"unknown field", `{"question":"q","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"admin":true}`, http.StatusBadRequest},
		{"one option", `{"question":"q","options":[{"id":"a","label":"A"}]}`, http.StatusBadRequest},
		{"duplicate option", `{"question":"q","options":[{"id":"a","label":"A"},{"id":"a","label":"B"}]}`, http.StatusBadRequest},
		{"hostile id", `{"id":"../../etc","question":"q","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]}`, http.StatusBadRequest},
		{"overflowing duration", `{"question":"q","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":1e400}`, http.StatusBadRequest},
		{"negative duration", `{"question":"q","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":-1}`, http.StatusBadRequest},
		{"two documents", `{"question":"q","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]} {}`, http.StatusBadRequest},
		{"oversized", `{"question":"` + strings.Repeat("x", DefaultMaxBody) + `"}`, http.StatusRequestEntityTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, body := r.do("POST", "/v1/polls", c.body)
			if st != c.status || code(body) == "" {
				t.Fatalf("status %d (%v), want %d with an error code", st, body, c.status)
			}
		})
	}
	if n := len(r.state.Defs.Polls()); n != 0 {
		t.Fatalf("refused requests left %d polls", n)
	}
	good := `{"id":"p","question":"q","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]}`
	r.mustCreate(good)
	if st, body := r.do("POST", "/v1/polls", good); st != http.StatusConflict {
		t.Fatalf("second create of p: %d %v, want 409", st, body)
	}
}

func TestListPollsPagesThroughEveryPollOnce(t *testing.T) {
	r := newRig(t)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		r.mustCreate(`{"id":"` + id + `","question":"q","options":[{"id":"x","label":"X"},{"id":"y","label":"Y"}]}`)
		r.clock.add(time.Millisecond) // each opens later: newest first is e..a
	}
	var got []string
	cursor := ""
	for range 10 {
		path := "/v1/polls?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		st, body := r.do("GET", path, "")
		if st != http.StatusOK {
			t.Fatalf("%s: %d %v", path, st, body)
		}
		for _, p := range body["polls"].([]any) {
			got = append(got, p.(map[string]any)["id"].(string))
		}
		next, ok := body["next_cursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	if strings.Join(got, "") != "edcba" {
		t.Fatalf("pages gave %v, want e d c b a", got)
	}
	for _, q := range []string{"limit=0", "limit=201", "limit=x", "limit=-1", "cursor=%%%", "cursor=bm90LWEtY3Vyc29y", "cursor=" + strings.Repeat("A", 400)} {
		if st, body := r.do("GET", "/v1/polls?"+q, ""); st != http.StatusBadRequest || code(body) != api.CodeInvalidRequest {
			t.Errorf("?%s: %d %v, want 400 invalid_request", q, st, body)
		}
	}
}

func TestExtendAndCloseChangeOnlyWhatTheySay(t *testing.T) {
	r := newRig(t)
	r.mustCreate(`{"id":"p","question":"q","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":60}`)
	def, _ := r.state.Defs.Poll("p")
	for _, body := range []string{`{}`, `{"by_s":10,"closes_at":1}`, `{"by_s":0}`, `{"by_s":1e400}`, `{"by_s":"10"}`, `{"closes_at":1}`} {
		if st, b := r.do("POST", "/v1/polls/p/extend", body); st != http.StatusBadRequest {
			t.Errorf("extend %s: %d %v, want 400", body, st, b)
		}
	}
	if after, _ := r.state.Defs.Poll("p"); after.ClosesAt != def.ClosesAt {
		t.Fatalf("refused extends moved the close from %d to %d", def.ClosesAt, after.ClosesAt)
	}
	if st, b := r.do("POST", "/v1/polls/p/extend", `{"by_s":30}`); st != http.StatusOK || int64(b["closes_at"].(float64)) != def.ClosesAt+30_000 {
		t.Fatalf("extend by 30 s: %d %v", st, b)
	}
	if st, b := r.do("POST", "/v1/polls/p/close", ``); st != http.StatusOK || int64(b["closes_at"].(float64)) > r.clock.now().UnixMilli()+1 {
		t.Fatalf("close: %d %v", st, b)
	}
	r.clock.add(time.Second)
	if st, b := r.do("POST", "/v1/polls/p/extend", `{"by_s":30}`); st != http.StatusConflict || code(b) != api.CodePollClosed {
		t.Fatalf("extend after the close: %d %v, want 409 poll_closed", st, b)
	}
	if st, b := r.do("POST", "/v1/polls/nope/close", ``); st != http.StatusNotFound || code(b) != api.CodePollNotFound {
		t.Fatalf("close of a missing poll: %d %v", st, b)
	}
}

func TestQuizRunsQuestionByQuestion(t *testing.T) {
	r := newRig(t)
	q := `{"id":"qz","title":"T","questions":[` +
		`{"text":"one","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"correct":["a"],"limit_ms":10000},` +
		`{"text":"two","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"correct":["b"],"limit_ms":10000}]}`
	if st, b := r.do("POST", "/v1/quizzes", q); st != http.StatusCreated {
		t.Fatalf("create quiz: %d %v", st, b)
	}
	// Before it starts, a question is the host's: a viewer sees no poll.
	if st, _ := r.do("GET", "/v1/polls/qz-1", ""); st != http.StatusNotFound {
		t.Fatalf("a parked question is visible to viewers: %d", st)
	}
	step := func(action string, want int, wantCode string) {
		t.Helper()
		st, b := r.do("POST", "/v1/quizzes/qz/"+action, "")
		if st != want || (wantCode != "" && code(b) != wantCode) {
			t.Fatalf("%s: %d %v, want %d %s", action, st, b, want, wantCode)
		}
	}
	// Parked is a state, not a time: forty days later the question is
	// still waiting for its start, and the poll endpoints leave it alone.
	r.clock.add(40 * 24 * time.Hour)
	for _, action := range []string{"close", "reveal", "extend"} {
		if st, b := r.do("POST", "/v1/polls/qz-1/"+action, `{"by_s":60}`); st != http.StatusConflict || code(b) != api.CodePollNotOpen {
			t.Fatalf("%s of a parked question: %d %v", action, st, b)
		}
	}
	if def, _ := r.state.Defs.Poll("qz-1"); !def.Parked() || !def.Hidden || def.StatusAt(r.clock.now().UnixMilli(), false) != poll.Scheduled {
		t.Fatalf("a parked question 40 days on: %+v", def)
	}
	step("reveal", http.StatusConflict, api.CodePollNotOpen)
	step("start", http.StatusOK, "")
	if def, _ := r.state.Defs.Poll("qz-1"); def.Parked() || def.OpensAt != r.clock.now().UnixMilli() {
		t.Fatalf("the start did not set the schedule: %+v", def)
	}
	if st, b := r.do("GET", "/v1/polls/qz-1", ""); st != http.StatusOK || b["status"] != "open" {
		t.Fatalf("started question: %d %v", st, b)
	}
	if st, b := r.do("GET", "/v1/polls/qz-1", ""); st != http.StatusOK || b["totals"] != nil {
		t.Fatalf("an unrevealed question shows its counts: %v", b)
	}
	step("start", http.StatusConflict, api.CodePollNotClosed)
	step("close", http.StatusOK, "")
	r.clock.add(time.Millisecond)
	step("close", http.StatusConflict, api.CodePollClosed)
	step("reveal", http.StatusOK, "")
	if def, _ := r.state.Defs.Poll("qz-1"); def.Hidden {
		t.Fatal("reveal left question 1 hidden")
	}
	step("end", http.StatusOK, "") // question 2 is skipped: closed, unanswered
	r.clock.add(time.Millisecond)
	step("start", http.StatusConflict, api.CodeQuizEnded)
	if def, _ := r.state.Defs.Poll("qz-2"); def.Hidden || def.StatusAt(r.clock.now().UnixMilli(), false) == "open" {
		t.Fatalf("question 2 after the end: %+v", def)
	}
	if st, b := r.do("POST", "/v1/quizzes/none/start", ""); st != http.StatusNotFound || code(b) != api.CodeQuizNotFound {
		t.Fatalf("start of a missing quiz: %d %v", st, b)
	}
	if st, b := r.do("POST", "/v1/quizzes", `{"id":"qz","title":"T","questions":[]}`); st != http.StatusBadRequest {
		t.Fatalf("a quiz with no question: %d %v", st, b)
	}
}

func TestLedgerExportOfAMissingPoll(t *testing.T) {
	r := newRig(t)
	if st, b := r.do("GET", "/v1/polls/none/ledger", ""); st != http.StatusNotFound || code(b) != api.CodePollNotFound {
		t.Fatalf("%d %v", st, b)
	}
	r.mustCreate(`{"id":"p","question":"q","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]}`)
	req := httptest.NewRequest("GET", "/v1/polls/p/ledger", nil)
	w := httptest.NewRecorder()
	r.mux.ServeHTTP(w, req)
	body, _ := io.ReadAll(w.Body)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("export of an empty poll: %d %q %s", w.Code, w.Header().Get("Content-Type"), body)
	}
	def, _ := r.state.Defs.Poll("p")
	if want := fmt.Sprintf(`{"close":{"poll":"p","closes_at":%d,"close_rule":"node"}}`+"\n", def.ClosesAt); string(body) != want {
		t.Fatalf("export of an empty poll: %q, want its close line %q", body, want)
	}
}

// The binary export with after=N is the tail of the node's own chain; a
// bad after is refused and streams nothing.
func TestLedgerExportAfterASeq(t *testing.T) {
	r := newRig(t)
	r.mustCreate(`{"id":"p","question":"q","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]}`)
	def, _ := r.state.Defs.Poll("p")
	for i := range 4 {
		v := fmt.Sprint("v", i)
		if _, err := r.ledger.Append(ledger.Record{Poll: "p", Voter: v, Option: "a", Idem: v, Wall: def.OpensAt + 1, Trust: 1, Counted: true}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(q string) (int, []uint64) {
		w := httptest.NewRecorder()
		r.mux.ServeHTTP(w, httptest.NewRequest("GET", "/v1/polls/p/ledger?"+q, nil))
		var seqs []uint64
		if w.Code == http.StatusOK {
			for rec, err := range ledger.ReadStream(w.Body) {
				if err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				seqs = append(seqs, rec.Seq)
			}
		}
		return w.Code, seqs
	}
	for q, want := range map[string][]uint64{
		"format=binary":                            {1, 2, 3, 4},
		"format=binary&after=0":                    {1, 2, 3, 4},
		"format=binary&after=2":                    {3, 4},
		"format=binary&after=4":                    nil,
		"format=binary&after=18446744073709551615": nil,
	} {
		if st, got := get(q); st != http.StatusOK || !slices.Equal(got, want) {
			t.Errorf("%s: %d %v, want %v", q, st, got, want)
		}
	}
	for _, q := range []string{"format=binary&after=", "format=binary&after=-1", "format=binary&after=1e3", "format=binary&after=NaN",
		"format=binary&after=18446744073709551616", "format=binary&after=" + strings.Repeat("9", 5000), "after=2"} {
		if st, _ := get(q); st != http.StatusBadRequest {
			t.Errorf("%.60s: %d, want 400", q, st)
		}
	}
}

// FuzzDecodeCursor: a cursor from a stranger is refused or decodes to a
// page key that encodes back to a cursor with the same key.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor(pageKey{1_800_000_000_000, "p"}))
	f.Add("")
	f.Add("MTIzLw")
	f.Add(strings.Repeat("QUFB", 50))
	f.Fuzz(func(t *testing.T, s string) {
		k, ok := decodeCursor(s)
		if !ok {
			return
		}
		k2, ok := decodeCursor(encodeCursor(k))
		if !ok || k2 != k {
			t.Fatalf("%q decoded to %+v, which re-encodes to %+v (%v)", s, k, k2, ok)
		}
	})
}

// A quiz question created as a poll with a later opens_at is the host's
// until it opens, as a parked one is: no viewer sees it (nor its correct
// option) before.
func TestAScheduledQuizQuestionIsWithheldUntilItOpens(t *testing.T) {
	r := newRig(t)
	opens := r.clock.now().Add(time.Minute).UnixMilli()
	body := fmt.Sprintf(`{"id":"dq-1","question":"2+2?","options":[{"id":"a","label":"3"},{"id":"b","label":"4"}],"opens_at":%d,`+
		`"quiz":{"quiz":"dq","index":0,"correct":["b"],"points":1000,"limit_ms":20000}}`, opens)
	if st, b := r.do("POST", "/v1/polls", body); st != http.StatusCreated {
		t.Fatalf("create: %d %v", st, b)
	}
	if st, b := r.do("GET", "/v1/polls/dq-1", ""); st != http.StatusNotFound {
		t.Fatalf("before it opens, a viewer gets %d %v", st, b)
	}
	if st, b := r.do("GET", "/v1/quizzes/dq", ""); st != http.StatusOK || b["started"] != float64(0) || len(b["questions"].([]any)) != 0 {
		t.Fatalf("the quiz before it opens: %d %v", st, b)
	}
	r.clock.add(time.Minute)
	if st, b := r.do("GET", "/v1/polls/dq-1", ""); st != http.StatusOK {
		t.Fatalf("once open: %d %v", st, b)
	}
}

// A ledger export with fence= makes the node's ledger final for the poll
// before it reads (certification at close): the fence is called for the
// poll before the records are read; a fence that fails answers 503 and no
// records; a fence more than 5 s ahead of the node's clock is 503 and
// fences nothing; a fence inside the poll's window here is 409 and fences
// nothing; a malformed or non-canonical fence, one without format=binary,
// or one at a node without a fence (an edge) is a 400.
func TestLedgerExportFences(t *testing.T) {
	r := newRig(t)
	r.mustCreate(`{"id":"p","question":"q","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]}`)
	def, _ := r.state.Defs.Poll("p")
	var fenced []string
	fail := false
	h, err := New(Config{State: r.state, Clock: hlcClock(t, r), Ledger: r.ledger, Now: r.clock.now, Fence: func(poll string, _ int64) error {
		if fail {
			return errors.New("disk full")
		}
		fenced = append(fenced, poll)
		// What a fence waits for lands before the export reads.
		v := fmt.Sprint("in-flight-", len(fenced))
		_, err := r.ledger.Append(ledger.Record{Poll: "p", Voter: v, Option: "a", Idem: v, Wall: def.OpensAt + 1, Trust: 1, Counted: true})
		return err
	}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(mux func(http.ResponseWriter, *http.Request), q string) (int, int) {
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/v1/polls/p/ledger?"+q, nil)
		req.SetPathValue("poll", "p")
		mux(w, req)
		n := 0
		if w.Code == http.StatusOK {
			for _, err := range ledger.ReadStream(w.Body) {
				if err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				n++
			}
		}
		return w.Code, n
	}
	at := func(wall int64) string {
		return url.QueryEscape(hlc.Timestamp{Wall: wall, Logical: 3, Replica: "us-1"}.String())
	}
	now := r.clock.now().UnixMilli()
	// While the poll is open here (this node has not heard of its close),
	// a fence does not close it: 409, no records, nothing fenced.
	if code, n := get(h.HandleLedger, "format=binary&fence="+at(now+1000)); code != http.StatusConflict || n != 0 || len(fenced) != 0 {
		t.Fatalf("a fence inside the poll's window here: %d with %d records, fenced %v; want 409, nothing fenced", code, n, fenced)
	}
	if st, _ := r.do("POST", "/v1/polls/p/close", ""); st != http.StatusOK {
		t.Fatalf("close: %d", st)
	}
	def, _ = r.state.Defs.Poll("p")
	if code, _ := get(h.HandleLedger, "format=binary&fence="+at(def.GraceEnd()+6000)); code != http.StatusServiceUnavailable || len(fenced) != 0 {
		t.Fatalf("a fence 6 s ahead of the node's clock: %d, fenced %v; want 503, nothing fenced", code, fenced)
	}
	r.clock.t = time.UnixMilli(def.GraceEnd())
	if code, n := get(h.HandleLedger, "format=binary&after=0&fence="+at(def.GraceEnd())); code != http.StatusOK || n != 1 {
		t.Fatalf("a fenced export: %d with %d records, want 200 with the one the fence waited for", code, n)
	}
	if len(fenced) != 1 || fenced[0] != "p" {
		t.Fatalf("fenced %v, want p once", fenced)
	}
	fail = true
	if code, _ := get(h.HandleLedger, "format=binary&fence="+at(def.GraceEnd())); code != http.StatusServiceUnavailable {
		t.Fatalf("a failed fence: %d, want 503", code)
	}
	w := strconv.FormatInt(def.GraceEnd(), 10)
	for _, q := range []string{"format=binary&fence=", "format=binary&fence=x", "format=binary&fence=-1.0", "format=binary&fence=1.99999999999",
		"format=binary&fence=" + strings.Repeat("9", 5000) + ".0", "fence=" + w + ".0%40us-1",
		"format=binary&fence=" + w + ".0", "format=binary&fence=" + w + ".0%40", "format=binary&fence=%2B" + w + ".0%40x",
		"format=binary&fence=" + w + ".0%40x%40y", "format=binary&fence=0" + w + ".0%40x", "format=binary&fence=" + w + ".0%40" + strings.Repeat("r", 5000),
		// Given twice, conflicting, or not a query: refused, not the first value.
		"format=binary&fence=" + at(def.GraceEnd()) + "&fence=junk", "format=binary&fence=" + at(def.GraceEnd()) + "&fence=" + at(def.GraceEnd()),
		"format=binary&format=ndjson&fence=" + at(def.GraceEnd()), "format=binary;fence=" + at(def.GraceEnd()), "format=binary&after=1&after=2"} {
		if code, _ := get(h.HandleLedger, q); code != http.StatusBadRequest {
			t.Errorf("%.80s: %d, want 400", q, code)
		}
	}
	if code, _ := get(func(w http.ResponseWriter, req *http.Request) { r.mux.ServeHTTP(w, req) }, "format=binary&fence="+at(def.GraceEnd())); code != http.StatusBadRequest {
		t.Fatalf("fence= at a host without a fence: %d, want 400", code)
	}
}

func hlcClock(t *testing.T, r *rig) *hlc.Clock {
	t.Helper()
	c, err := hlc.New(hlc.Config{Replica: "eu-1", Now: r.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
