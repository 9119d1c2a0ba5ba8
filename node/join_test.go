package node

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"tally/ids"
)

// Join codes: a poll's, an event's (its current poll, as the event views
// pick it) and a quiz's resolve to their pages, typed in any case; a quiz
// question before it is started, an unknown code and a malformed one do
// not; /j/{code} redirects there (or to the join form); a poll created
// after a lookup resolves within a second.
func TestJoinCodes(t *testing.T) {
	tn := startNode(t, t.TempDir(), nil)
	now := tn.clock.now().UnixMilli()
	for _, spec := range []string{
		`{"id":"warmup","question":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":60,"event":"final"}`,
		`{"id":"later","question":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"event":"final","opens_at":` + strconv.FormatInt(now+600_000, 10) + `}`,
	} {
		if r := tn.admin(t, "POST", "/v1/polls", spec); r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.raw)
		}
	}
	if r := tn.admin(t, "POST", "/v1/quizzes", pubQuiz); r.status != http.StatusCreated {
		t.Fatalf("create quiz: %d %s", r.status, r.raw)
	}
	join := func(code string) response {
		t.Helper()
		return tn.call(t, "GET", "/v1/join/"+code, "")
	}
	for _, c := range []struct{ code, kind, id, poll, path string }{
		{ids.JoinCode(ids.JoinPoll, "warmup"), "poll", "warmup", "", "/#/poll/warmup"},
		{strings.ToLower(ids.JoinCode(ids.JoinEvent, "final")), "event", "final", "warmup", "/#/poll/warmup"}, // open beats scheduled
		{ids.JoinCode(ids.JoinQuiz, "pub")[:3] + "-" + ids.JoinCode(ids.JoinQuiz, "pub")[3:], "quiz", "pub", "", "/#/quiz/pub"},
	} {
		r := join(c.code)
		if r.status != 200 || r.body["kind"] != c.kind || r.body["id"] != c.id || r.body["path"] != c.path || c.poll != "" && r.body["poll"] != c.poll {
			t.Errorf("%s: %d %s", c.code, r.status, r.raw)
		}
	}
	// Not yet seen by viewers: a parked quiz question.
	if r := join(ids.JoinCode(ids.JoinPoll, "pub-1")); r.status != 404 || r.code() != "join_code_not_found" {
		t.Errorf("a parked question's code: %d %s", r.status, r.raw)
	}
	for code, want := range map[string]int{
		"ZZZZZZ": 404, "OOOOOO": 400, "ABC": 400, strings.Repeat("A", 40): 400, "%E2%80%AEABCDEF": 400, "ABC%00DEF": 400,
	} {
		if r := join(code); r.status != want {
			t.Errorf("%q: %d %s, want %d", code, r.status, r.raw, want)
		}
	}

	// The event moves on: the warm-up closes, the next opens.
	tn.clock.advance(10*time.Minute + 5*time.Second)
	if r := join(ids.JoinCode(ids.JoinEvent, "final")); r.body["poll"] != "later" {
		t.Errorf("the event's current poll after the warm-up: %s", r.raw)
	}

	// A poll created after a lookup: found once the index is a second old.
	tn.createPoll(t, "fresh")
	tn.clock.advance(time.Second)
	if r := join(ids.JoinCode(ids.JoinPoll, "fresh")); r.status != 200 {
		t.Errorf("a new poll's code: %d %s", r.status, r.raw)
	}

	// The printed address redirects.
	noFollow := *tn.client
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for path, want := range map[string]string{
		"/j/" + ids.JoinCode(ids.JoinQuiz, "pub"): "/#/quiz/pub",
		"/j/zzzzzz":    "/#/join/zzzzzz",
		"/j/no%20such": "/#/join/no%20such",
	} {
		res, err := noFollow.Get(tn.url + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusFound || res.Header.Get("Location") != want {
			t.Errorf("%s: %d to %q, want %q", path, res.StatusCode, res.Header.Get("Location"), want)
		}
	}
}
