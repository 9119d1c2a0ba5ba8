package fanout

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"tally/api"
	"tally/hlc"
	"tally/poll"
	"tally/quiz"
	"tally/state"
)

// putQuiz writes a quiz of n questions, z-1 … z-n, into st, opening at
// opens: started if that is in the past, parked if not.
func putQuiz(t testing.TB, st *state.State, id string, n int, opens time.Time) {
	t.Helper()
	for i := range n {
		def := poll.Definition{ID: id + "-" + string(rune('1'+i)), Question: "secret question " + string(rune('1'+i)),
			Options: []poll.Option{{ID: "a", Label: "3"}, {ID: "b", Label: "4"}}, Hidden: true, Event: id,
			OpensAt: opens.UnixMilli(), ClosesAt: opens.Add(20 * time.Second).UnixMilli(),
			Quiz: &poll.QuizQuestion{Quiz: id, Title: "Maths", Index: i, Correct: []string{"b"}, Points: 1000, LimitMs: 20_000, Started: opens.Before(time.Now())}}
		if _, err := st.Defs.PutPoll(def, hlc.Timestamp{Wall: 10, Replica: "eu-1"}); err != nil {
			t.Fatal(err)
		}
	}
}

// amend rewrites one question the way the host's actions do.
func amend(t testing.TB, st *state.State, id string, wall int64, change func(*poll.Definition)) {
	t.Helper()
	def, _ := st.Defs.Poll(id)
	if def.Quiz != nil {
		q := *def.Quiz // not the stored copy
		def.Quiz = &q
	}
	change(&def)
	if _, err := st.Defs.PutPoll(def, hlc.Timestamp{Wall: wall, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
}

func dialQuiz(t *testing.T, srv interface{ URLFor(string) string }, id string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, srv.URLFor("/v1/quizzes/"+id+"/live"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

type wsURL string

func (u wsURL) URLFor(path string) string { return "ws" + strings.TrimPrefix(string(u), "http") + path }

// quizReader reads a quiz stream's frames on its own goroutine (which also
// answers pings), so a test can wait for the one it wants.
type quizReader struct {
	mu     sync.Mutex
	frames []map[string]json.RawMessage
	raw    []string
}

func readQuiz(t *testing.T, c *websocket.Conn) *quizReader {
	r := &quizReader{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			var m map[string]json.RawMessage
			json.Unmarshal(b, &m)
			r.mu.Lock()
			r.frames, r.raw = append(r.frames, m), append(r.raw, string(b))
			r.mu.Unlock()
		}
	}()
	return r
}

// await returns the first frame since from for which ok holds, and the
// index after it.
func (r *quizReader) await(t *testing.T, from int, ok func(raw string, m map[string]json.RawMessage) bool) (map[string]json.RawMessage, int) {
	t.Helper()
	var got map[string]json.RawMessage
	next := from
	waitUntil(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i := next; i < len(r.frames); i++ {
			if ok(r.raw[i], r.frames[i]) {
				got, next = r.frames[i], i+1
				return true
			}
		}
		return false
	})
	return got, next
}

func (r *quizReader) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.raw...)
}

func typeIs(typ string) func(string, map[string]json.RawMessage) bool {
	return func(_ string, m map[string]json.RawMessage) bool { return string(m["type"]) == `"`+typ+`"` }
}

// The quiz's stream follows the quiz on one socket: nothing of a parked
// question, then each question as the host starts it; an answer sent on
// it is timed from when this socket got the question's first open frame,
// and may only name a started question of this quiz.
func TestQuizStreamFollowsTheQuizAndTimesAnswers(t *testing.T) {
	st := newState(t)
	putQuiz(t, st, "z", 2, time.Now().Add(24*time.Hour))
	putQuiz(t, st, "other", 1, time.Now().Add(-time.Second)) // another quiz, started
	rec := &recordingVoter{}
	var clock sync.Mutex
	now := time.Now()
	_, srv := serve(t, st, func(c *Config) {
		c.Voter = rec
		c.Now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	})
	c := dialQuiz(t, wsURL(srv.URL), "z")
	r := readQuiz(t, c)
	first, next := r.await(t, 0, typeIs(TypeQuiz))
	if string(first["status"]) != `"ready"` || first["question"] != nil {
		t.Fatalf("before the start: %v", first)
	}

	// The host starts question 1 at `now`.
	opened := now
	clock.Lock()
	now = now.Add(10 * time.Millisecond) // the frame goes out at this time
	shown := now
	clock.Unlock()
	amend(t, st, "z-1", 20, func(d *poll.Definition) {
		d.OpensAt, d.ClosesAt = opened.UnixMilli(), opened.Add(20*time.Second).UnixMilli()
		d.Quiz.Started = true
	})
	q, next := r.await(t, next, func(_ string, m map[string]json.RawMessage) bool { return string(m["status"]) == `"question"` })
	var qv api.QuestionView
	json.Unmarshal(q["question"], &qv)
	if qv.Poll != "z-1" || qv.Status != poll.Open || qv.ClosesAt != opened.Add(20*time.Second).UnixMilli() || qv.Correct != nil || qv.Totals != nil {
		t.Fatalf("question frame: %+v", qv)
	}
	clock.Lock()
	now = now.Add(1500 * time.Millisecond)
	clock.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	send := func(s string) { c.Write(ctx, websocket.MessageText, []byte(s)) }
	body := `"body":{"option":"b","voter":"v","idem":"k"}`
	send(`{"type":"vote","ref":"1","poll":"z-1",` + body + `}`)
	ack, next := r.await(t, next, typeIs(TypeAck))
	if last, n := rec.get(); n != 1 || last.ShownMs != shown.UnixMilli() || string(ack["ref"]) != `"1"` {
		t.Fatalf("answer: %d votes, shown %d (want %d), ack %v", n, last.ShownMs, shown.UnixMilli(), ack)
	}
	// Not a started question of this quiz: refused, and the voter never asked.
	for i, p := range []string{"z-2", "other-1", "p", "", "nope"} {
		send(`{"type":"vote","ref":"r` + p + `","poll":"` + p + `",` + body + `}`)
		var e map[string]json.RawMessage
		e, next = r.await(t, next, typeIs(TypeError))
		if string(e["ref"]) != `"r`+p+`"` || !strings.Contains(string(e["error"]), "poll_not_found") {
			t.Fatalf("%d %q: %v", i, p, e)
		}
	}
	if _, n := rec.get(); n != 1 {
		t.Fatalf("refused answers reached the voter: %d", n)
	}
	for _, raw := range r.all() {
		if strings.Contains(raw, "secret question 2") {
			t.Fatalf("a parked question leaked: %s", raw)
		}
	}

	// Revealed: the correct option and the counts go out.
	amend(t, st, "z-1", 30, func(d *poll.Definition) { d.Hidden = false; d.ClosesAt = now.UnixMilli() })
	rev, _ := r.await(t, next, func(_ string, m map[string]json.RawMessage) bool {
		return strings.Contains(string(m["question"]), `"revealed":true`)
	})
	json.Unmarshal(rev["question"], &qv)
	if qv.Status != poll.Closed || len(qv.Correct) != 1 || qv.Totals == nil || string(rev["status"]) != `"between"` {
		t.Fatalf("revealed: %s %+v", rev["status"], qv)
	}
}

// Each participant who says who they are is told their own standing, when
// they join and whenever the ranking changes; nobody else is.
func TestQuizStreamTellsEachParticipantTheirStanding(t *testing.T) {
	st := newState(t)
	putQuiz(t, st, "z", 1, time.Now().Add(-time.Second))
	var mu sync.Mutex
	digest := ""
	scores := map[string]int64{}
	standings := func(string) Standings {
		mu.Lock()
		defer mu.Unlock()
		if digest == "" {
			return Standings{}
		}
		sc := make(map[string]int64, len(scores))
		for k, v := range scores {
			sc[k] = v
		}
		return Standings{Digest: digest, Participants: len(sc), Top: []quiz.Standing{{Rank: 1, Participant: "p-ann", Score: sc["ann"]}},
			Of: func(voter string) (quiz.Standing, bool) {
				s, ok := sc[voter]
				rank := 1
				if voter == "bob" {
					rank = 2
				}
				return quiz.Standing{Rank: rank, Participant: "p-" + voter, Score: s}, ok
			}}
	}
	_, srv := serve(t, st, func(c *Config) { c.Standings = standings })
	ann, bob, eve, lurker := dialQuiz(t, wsURL(srv.URL), "z"), dialQuiz(t, wsURL(srv.URL), "z"), dialQuiz(t, wsURL(srv.URL), "z"), dialQuiz(t, wsURL(srv.URL), "z")
	ra, rb, re, rl := readQuiz(t, ann), readQuiz(t, bob), readQuiz(t, eve), readQuiz(t, lurker)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, j := range []struct {
		c     *websocket.Conn
		r     *quizReader
		voter string
	}{{ann, ra, "ann"}, {bob, rb, "bob"}, {eve, re, "eve"}} {
		j.c.Write(ctx, websocket.MessageText, []byte(`{"type":"join","ref":"j","voter":"`+j.voter+`"}`))
		j.r.await(t, 0, typeIs(TypeAck))
	}
	mu.Lock()
	digest, scores = "d1", map[string]int64{"ann": 900, "bob": 500}
	mu.Unlock()
	want := func(r *quizReader, from int, dg, you string) int {
		t.Helper()
		_, next := r.await(t, from, func(raw string, m map[string]json.RawMessage) bool {
			return string(m["type"]) == `"standing"` && string(m["leaderboard_digest"]) == `"`+dg+`"` && strings.Contains(raw, you)
		})
		return next
	}
	na := want(ra, 0, "d1", `"you":{"rank":1,"participant":"p-ann","score":900`)
	nb := want(rb, 0, "d1", `"rank":2,"participant":"p-bob","score":500`)
	ne := want(re, 0, "d1", `"you":null`) // answered nothing counted yet
	// The shared frame carries the top.
	rl.await(t, 0, func(_ string, m map[string]json.RawMessage) bool { return string(m["leaderboard_digest"]) == `"d1"` })

	mu.Lock()
	digest, scores = "d2", map[string]int64{"ann": 900, "bob": 1400, "eve": 300}
	mu.Unlock()
	want(ra, na, "d2", `"score":900`)
	want(rb, nb, "d2", `"score":1400`)
	want(re, ne, "d2", `"p-eve","score":300`)
	rl.await(t, 0, func(_ string, m map[string]json.RawMessage) bool { return string(m["leaderboard_digest"]) == `"d2"` })
	for _, raw := range rl.all() {
		if strings.Contains(raw, `"standing"`) {
			t.Fatalf("a viewer who did not join got a standing: %s", raw)
		}
	}

	// A late joiner gets theirs at once.
	late := dialQuiz(t, wsURL(srv.URL), "z")
	rlate := readQuiz(t, late)
	late.Write(ctx, websocket.MessageText, []byte(`{"type":"join","voter":"bob"}`))
	want(rlate, 0, "d2", `"score":1400`)
}

// Hostile and malformed input on a quiz's stream: a bad join is refused
// and the socket stays; an unknown quiz is 404; a vote on a poll's stream
// keeps going to that poll whatever "poll" it names.
func TestQuizStreamHostileInput(t *testing.T) {
	st := newState(t)
	putQuiz(t, st, "z", 1, time.Now().Add(-time.Second))
	rec := &recordingVoter{}
	_, srv := serve(t, st, func(c *Config) { c.Voter = rec })

	res, err := http.Get(srv.URL + "/v1/quizzes/nope/live")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown quiz: %d", res.StatusCode)
	}

	c := dialQuiz(t, wsURL(srv.URL), "z")
	r := readQuiz(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	next := 0
	for _, in := range []string{
		`{"type":"join","ref":"a"}`,
		`{"type":"join","ref":"b","voter":""}`,
		`{"type":"join","ref":"c","voter":"` + strings.Repeat("v", maxVoterLen+1) + `"}`,
	} {
		c.Write(ctx, websocket.MessageText, []byte(in))
		var e map[string]json.RawMessage
		e, next = r.await(t, next, typeIs(TypeError))
		if !strings.Contains(string(e["error"]), "invalid_request") {
			t.Fatalf("%s: %v", in, e)
		}
	}
	// Still open: a good join is acknowledged.
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"join","ref":"d","voter":"ann"}`))
	r.await(t, next, typeIs(TypeAck))

	// On a poll's stream, "join" is an unknown message (closed with 1008),
	// and a vote goes to the stream's poll.
	p := dial(t, srv, "p")
	readMsg(t, p)
	p.Write(ctx, websocket.MessageText, []byte(`{"type":"vote","poll":"z-1","body":{"option":"a","voter":"v","idem":"k"}}`))
	waitUntil(t, func() bool { _, n := rec.get(); return n == 1 })
	p.Write(ctx, websocket.MessageText, []byte(`{"type":"join","voter":"ann"}`))
	for {
		if _, _, err := p.Read(ctx); err != nil {
			if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
				t.Fatalf("join on a poll's stream: %v", err)
			}
			break
		}
	}
}

// FuzzQuizStreamMessage sends one arbitrary message on a quiz's stream:
// whatever it is, the server answers it (a reply or a frame) or closes
// the socket with 1008, a vote reaches the voter only for a started
// question of this quiz, and the server goes on serving.
func FuzzQuizStreamMessage(f *testing.F) {
	for _, seed := range []string{
		`{"type":"join","ref":"j","voter":"ann"}`,
		`{"type":"join","voter":""}`,
		`{"type":"vote","ref":"a","poll":"z-1","body":{"option":"b","voter":"v","idem":"k"}}`,
		`{"type":"vote","poll":"z-2","body":{}}`,
		`{"type":"vote","poll":"other-1","body":{}}`,
		`{"type":"vote","poll":"../z-1"}`,
		`{"type":"resync"}`,
		`{"type":"hello"}`,
		`{"type":"vote","poll":"z-1","poll":"z-2"}`,
		`[]`, `null`, `"vote"`, ``, "\xff\xfe",
	} {
		f.Add([]byte(seed))
	}
	st := newState(f)
	putQuiz(f, st, "z", 2, time.Now().Add(24*time.Hour))
	amend(f, st, "z-1", 20, func(d *poll.Definition) {
		d.OpensAt, d.ClosesAt = time.Now().Add(-time.Second).UnixMilli(), time.Now().Add(time.Hour).UnixMilli()
		d.Quiz.Started = true
	})
	putQuiz(f, st, "other", 1, time.Now().Add(-time.Second))
	rec := &recordingVoter{}
	_, srv := serve(f, st, func(c *Config) { c.Voter, c.MaxViewersPerIP = rec, 1<<20 }) // sockets of past inputs may still be closing
	f.Fuzz(func(t *testing.T, msg []byte) {
		c := dialQuiz(t, wsURL(srv.URL), "z")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, _, err := c.Read(ctx); err != nil { // the first frame
			t.Fatal(err)
		}
		if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
			return // closed already
		}
		if _, _, err := c.Read(ctx); err != nil && websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
			t.Fatalf("%q: neither an answer nor a 1008 close: %v", msg, err)
		}
		rec.mu.Lock()
		for p := range rec.polls {
			if p != "z-1" {
				rec.mu.Unlock()
				t.Fatalf("%q: a vote reached the voter for %q", msg, p)
			}
		}
		rec.mu.Unlock()
	})
}

// A quiz participant who leaves frees their place at once, though their
// socket's round-trip pinger sleeps between pings (here for an hour).
func TestQuizSocketLeavesAtOnce(t *testing.T) {
	st := newState(t)
	putQuiz(t, st, "z", 1, time.Now().Add(-time.Second))
	s, srv := serve(t, st, func(c *Config) { c.RTTEvery = time.Hour })
	for _, open := range []func() *websocket.Conn{
		func() *websocket.Conn { return dialQuiz(t, wsURL(srv.URL), "z") },
		func() *websocket.Conn { return dial(t, srv, "z-1") }, // a question's own stream pings too
	} {
		c := open()
		waitUntil(t, func() bool { return s.Viewers() == 1 })
		c.CloseNow()
		waitUntil(t, func() bool { return s.Viewers() == 0 })
	}
}

// The lobby's count: the quiz's stream says how many participants have it
// open across the cluster, each counted once however many sockets they
// hold, a viewer who named nobody not at all; another node's report adds
// its own, and a participant who leaves is no longer counted.
func TestQuizStreamCountsJoinedParticipants(t *testing.T) {
	st := newState(t)
	putQuiz(t, st, "z", 2, time.Now().Add(time.Hour)) // parked: the lobby
	_, srv := serve(t, st, nil)
	lurker := readQuiz(t, dialQuiz(t, wsURL(srv.URL), "z"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	join := func(voter string) *websocket.Conn {
		c := dialQuiz(t, wsURL(srv.URL), "z")
		r := readQuiz(t, c)
		c.Write(ctx, websocket.MessageText, []byte(`{"type":"join","ref":"j","voter":"`+voter+`"}`))
		r.await(t, 0, typeIs(TypeAck))
		return c
	}
	joinedIs := func(n string) func(string, map[string]json.RawMessage) bool {
		return func(_ string, m map[string]json.RawMessage) bool {
			return string(m["type"]) == `"quiz"` && string(m["joined"]) == n
		}
	}
	ann1, ann2 := join("ann"), join("ann")
	join("bob")
	_, next := lurker.await(t, 0, joinedIs("2"))
	st.Audience.Merge("z-1", "us-1", 5, time.Now().UnixMilli()) // us-east's participants
	_, next = lurker.await(t, next, joinedIs("7"))
	ann1.Close(websocket.StatusNormalClosure, "")
	ann2.Close(websocket.StatusNormalClosure, "")
	lurker.await(t, next, joinedIs("6"))
}

// With tokens checked (Config.Participant), a join counts only when its
// token does, and names the token's voter, not the one it claims: a
// script naming made-up participants adds nothing to the joined.
func TestQuizJoinedCountsCheckedTokensOnly(t *testing.T) {
	st := newState(t)
	putQuiz(t, st, "z", 1, time.Now().Add(time.Hour))
	_, srv := serve(t, st, func(c *Config) {
		c.Participant = func(token, _, _ string) (string, bool, error) {
			if token == "unchecked" { // the check got no answer (an edge cut off)
				return "", false, api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "no full node checked the join")
			}
			if voter, ok := strings.CutPrefix(token, "good-"); ok {
				return voter, true, nil
			}
			return "", false, nil
		}
	})
	lurker := readQuiz(t, dialQuiz(t, wsURL(srv.URL), "z"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	join := func(msg string) string {
		c := dialQuiz(t, wsURL(srv.URL), "z")
		r := readQuiz(t, c)
		c.Write(ctx, websocket.MessageText, []byte(msg))
		m, _ := r.await(t, 0, typeIs(TypeAck))
		return string(m["result"])
	}
	if got := join(`{"type":"join","ref":"1","voter":"mallory-pretends-ann","token":"good-ann"}`); !strings.Contains(got, `"voter":"ann"`) {
		t.Errorf("a token's join names %s, want ann", got)
	}
	// A join whose check got no answer is refused, not taken unverified.
	c := dialQuiz(t, wsURL(srv.URL), "z")
	r := readQuiz(t, c)
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"join","ref":"u","voter":"someone-else","token":"unchecked"}`))
	if m, _ := r.await(t, 0, typeIs(TypeError)); !strings.Contains(string(m["error"]), `"unavailable"`) || string(m["ref"]) != `"u"` {
		t.Errorf("an unchecked join answered %s", m["error"])
	}
	for i := range 5 {
		join(fmt.Sprintf(`{"type":"join","ref":"1","voter":"bot-%d"}`, i))
		join(fmt.Sprintf(`{"type":"join","ref":"1","voter":"bot-%d","token":"forged"}`, i))
	}
	_, next := lurker.await(t, 0, func(_ string, m map[string]json.RawMessage) bool { return string(m["type"]) == `"quiz"` })
	join(`{"type":"join","ref":"1","voter":"x","token":"good-bob"}`)
	lurker.await(t, next, func(_ string, m map[string]json.RawMessage) bool {
		return string(m["type"]) == `"quiz"` && string(m["joined"]) == "2"
	})
	for _, raw := range lurker.all() {
		if strings.Contains(raw, `"joined":3`) || strings.Contains(raw, `"joined":7`) {
			t.Fatalf("unchecked joins counted: %s", raw)
		}
	}
}

// The lobby's frame names the newest counted participants who joined at
// this node, newest first, each once: a join with a bad name is refused
// and changes nothing, an uncounted join's name never shows, and after
// the quiz starts the names are gone from its frames.
func TestQuizLobbyNamesTheNewestJoins(t *testing.T) {
	st := newState(t)
	putQuiz(t, st, "z", 1, time.Now().Add(time.Hour))
	_, srv := serve(t, st, func(c *Config) {
		c.Participant = func(token, _, _ string) (string, bool, error) {
			voter, ok := strings.CutPrefix(token, "good-")
			return voter, ok, nil
		}
		c.NameAllowed = func(name string) bool { return name != "Rude Word" } // the node's name filter
	})
	lurker := readQuiz(t, dialQuiz(t, wsURL(srv.URL), "z"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keep []*websocket.Conn // the joined stay connected
	join := func(msg string) map[string]json.RawMessage {
		c := dialQuiz(t, wsURL(srv.URL), "z")
		keep = append(keep, c)
		r := readQuiz(t, c)
		c.Write(ctx, websocket.MessageText, []byte(msg))
		m, _ := r.await(t, 0, func(_ string, m map[string]json.RawMessage) bool { return string(m["ref"]) == `"1"` })
		return m
	}
	for name, bad := range map[string]string{
		"too long": strings.Repeat("é", api.MaxNameRunes+1),
		"bidi":     "Ann\u202eeivil",
		"control":  "Ann\x07",
		"filtered": "Rude Word",
		"zalgo":    "a" + strings.Repeat("\u0301", 39),
		"blank":    "\u3164",
	} {
		b, _ := json.Marshal(bad)
		if m := join(`{"type":"join","ref":"1","voter":"x","token":"good-x","name":` + string(b) + `}`); string(m["type"]) != `"error"` {
			t.Errorf("a join named %s was taken: %s", name, m["result"])
		}
	}
	longest := strings.Repeat("ü", api.MaxNameRunes)
	join(`{"type":"join","ref":"1","voter":"a","token":"good-ann","name":"Ann"}`)
	join(`{"type":"join","ref":"1","voter":"b","token":"forged","name":"Not Counted"}`)
	join(`{"type":"join","ref":"1","voter":"c","token":"good-zoe","name":"` + longest + `"}`)
	join(`{"type":"join","ref":"1","voter":"d","token":"good-ann","name":"Ann"}`) // Ann's second tab
	m, _ := lurker.await(t, 0, func(_ string, m map[string]json.RawMessage) bool {
		return string(m["type"]) == `"quiz"` && string(m["joined"]) == "2" && len(m["newest"]) > 0
	})
	var names []string
	json.Unmarshal(m["newest"], &names)
	if want := []string{"Ann", longest}; !slices.Equal(names, want) {
		t.Fatalf("newest %q, want %q (newest first, each participant once, no uncounted join)", names, want)
	}
	for _, raw := range lurker.all() {
		if strings.Contains(raw, "Not Counted") || strings.Contains(raw, "eivil") {
			t.Fatalf("a name that should not show went out: %s", raw)
		}
	}
}

// Names that look alike are one name: a join's name is put in its normal
// form (styled letters are the letters they style) before the name
// filter sees it and before it is kept and shown; a name that looks like
// another participant's in the quiz is a 400 (invalid_request) saying so
// and changes nothing; the participant who holds a name joins with it again.
func TestQuizJoinRefusesALookAlikeName(t *testing.T) {
	st := newState(t)
	putQuiz(t, st, "z", 1, time.Now().Add(time.Hour))
	var vetted []string
	var mu sync.Mutex
	_, srv := serve(t, st, func(c *Config) {
		c.Participant = func(token, _, _ string) (string, bool, error) {
			voter, ok := strings.CutPrefix(token, "good-")
			return voter, ok, nil
		}
		c.NameAllowed = func(name string) bool {
			mu.Lock()
			defer mu.Unlock()
			vetted = append(vetted, name)
			return name != "fuck"
		}
	})
	lurker := readQuiz(t, dialQuiz(t, wsURL(srv.URL), "z"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	join := func(voter, name string) map[string]json.RawMessage {
		t.Helper()
		c := dialQuiz(t, wsURL(srv.URL), "z")
		r := readQuiz(t, c)
		b, _ := json.Marshal(map[string]string{"type": "join", "ref": "1", "voter": voter, "token": "good-" + voter, "name": name})
		c.Write(ctx, websocket.MessageText, b)
		m, _ := r.await(t, 0, func(_ string, m map[string]json.RawMessage) bool { return string(m["ref"]) == `"1"` })
		return m
	}
	for _, styled := range []string{"𝐟𝐮𝐜𝐤", "ｆｕｃｋ", "ⓕⓤⓒⓚ"} {
		if m := join("rude", styled); string(m["type"]) != `"error"` {
			t.Errorf("%q passed the filter: %s", styled, m["result"])
		}
	}
	mu.Lock()
	if want := []string{"fuck", "fuck", "fuck"}; !slices.Equal(vetted, want) {
		t.Errorf("the filter saw %q, want %q", vetted, want)
	}
	mu.Unlock()
	if m := join("ann", "Ann"); string(m["type"]) != `"ack"` {
		t.Fatalf("Ann's join: %s", m["error"])
	}
	if m := join("zoe", "𝐙𝐨𝐞"); string(m["type"]) != `"ack"` || !strings.Contains(string(m["result"]), `"name":"Zoe"`) {
		t.Fatalf("a styled name is not kept in its normal form: %s %s", m["result"], m["error"])
	}
	for _, lookAlike := range []string{"Аnn", "ANN", "𝐀𝐧𝐧"} { // a Cyrillic А, capitals, bold
		m := join("mallory", lookAlike)
		var e api.ErrorInfo
		json.Unmarshal(m["error"], &e)
		if string(m["type"]) != `"error"` || e.Code != api.CodeInvalidRequest || !strings.Contains(e.Message, "looks like another participant") {
			t.Errorf("%q beside Ann: %s %s", lookAlike, m["type"], m["error"])
		}
	}
	if m := join("ann", "Ann"); string(m["type"]) != `"ack"` {
		t.Errorf("Ann joining again (another tab): %s", m["error"])
	}
	m, _ := lurker.await(t, 0, func(_ string, m map[string]json.RawMessage) bool {
		return string(m["type"]) == `"quiz"` && string(m["joined"]) == "2"
	})
	var names []string
	json.Unmarshal(m["newest"], &names)
	if !slices.Equal(names, []string{"Ann", "Zoe"}) { // Ann's second tab joined last
		t.Fatalf("newest %q, want Ann and Zoe (no look-alike, no styled letters)", names)
	}
}
