package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func post(t *testing.T, url, body string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer tok")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// An auditor reproduces a quiz's certified leaderboard from the exports of
// its questions; without one of them, or with an altered score, it is not
// reproduced.
func TestQuizResultReproducesTheLeaderboard(t *testing.T) {
	t.Setenv("TALLY_TOKEN", "tok")
	base := startTestNode(t, t.TempDir())
	t.Setenv("TALLY_URL", base)
	if c := post(t, base+"/v1/quizzes", `{"id":"pub","questions":[`+
		`{"text":"2+2?","options":[{"id":"a","label":"3"},{"id":"b","label":"4"}],"correct":["b"]},`+
		`{"text":"Paris?","options":[{"id":"y","label":"Yes"},{"id":"n","label":"No"}],"correct":["y"],"points":2000}]}`); c != 201 {
		t.Fatalf("create: %d", c)
	}
	for q, answers := range [][]string{{"alice:b", "bob:a", "carol:b"}, {"alice:y", "bob:y"}} {
		if c := post(t, base+"/v1/quizzes/pub/start", ""); c != 200 {
			t.Fatalf("start: %d", c)
		}
		for _, a := range answers {
			voter, option, _ := strings.Cut(a, ":")
			vote(t, base, "pub-"+string(rune('1'+q)), option, voter)
		}
		time.Sleep(5 * time.Millisecond) // the close comes after the start's millisecond
		if c := post(t, base+"/v1/quizzes/pub/close", ""); c != 200 {
			t.Fatalf("close: %d", c)
		}
		if c := post(t, base+"/v1/quizzes/pub/reveal", ""); c != 200 {
			t.Fatalf("reveal: %d", c)
		}
	}
	var out string
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _, _ = runCLI(t, "quiz", "result", "--quiz", "pub")
		if strings.Contains(out, "questions counted [0 1]") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not certified: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out, "3 participants") || !strings.Contains(out, "final") {
		t.Fatalf("leaderboard: %s", out)
	}
	dir := t.TempDir()
	for _, q := range []string{"pub-1", "pub-2"} {
		if _, stderr, code := runCLI(t, "ledger", "export", "--poll", q, "--node", base, "-o", dir); code != 0 {
			t.Fatalf("export: %s", stderr)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.ndjson"))
	out, stderr, code := runCLI(t, append([]string{"quiz", "result", "--quiz", "pub"}, files...)...)
	if code != 0 || !strings.Contains(out, "reproduced: 2 questions") {
		t.Fatalf("reproduce: %d %s %s", code, out, stderr)
	}
	if out, _, code := runCLI(t, "quiz", "result", "--quiz", "pub", files[0]); code != 1 || !strings.Contains(out, "NOT REPRODUCED") {
		t.Fatalf("one question's exports missing: %d %s", code, out)
	}
	b, _ := os.ReadFile(files[0])
	os.WriteFile(files[0], bytes.Replace(b, []byte(`"score":`), []byte(`"score":1`), 1), 0o644)
	if _, stderr, code := runCLI(t, append([]string{"quiz", "result", "--quiz", "pub"}, files...)...); code != 1 || stderr == "" {
		t.Fatalf("an altered score: %d %s", code, stderr)
	}
}

// lineWatch is a progress writer that reports when a line appears.
type lineWatch struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	seen chan struct{}
}

func (w *lineWatch) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	if w.seen != nil && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
		w.seen = nil
	}
	return len(b), nil
}

// The quiz swarm connects its participants to the quiz's stream, answers
// the question the host starts on each socket, and waits for each
// participant's standing: every figure of its report comes from a real
// node.
func TestQuizSwarmMeasuresAQuestion(t *testing.T) {
	base := startTestNode(t, t.TempDir())
	if c := post(t, base+"/v1/quizzes", `{"id":"herd","questions":[{"text":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"correct":["b"]}]}`); c != 201 {
		t.Fatalf("create: %d", c)
	}
	const n = 30
	progress := &lineWatch{want: fmt.Sprintf("connected %d/%d", n, n), seen: make(chan struct{})}
	connected := progress.seen
	type outcome struct {
		rep *quizSwarmReport
		err error
	}
	done := make(chan outcome, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() {
		rep, err := runQuizSwarm(ctx, quizSwarmConfig{url: base, quiz: "herd", participants: n, perIP: 10, ramp: 100 * time.Millisecond, within: 300 * time.Millisecond, progress: progress})
		done <- outcome{rep, err}
	}()
	select {
	case <-connected:
	case o := <-done:
		t.Fatalf("the swarm ended before connecting: %+v %v", o.rep, o.err)
	}
	if c := post(t, base+"/v1/quizzes/herd/start", ""); c != 200 {
		t.Fatalf("start: %d", c)
	}
	// Every participant has answered once the quiz view counts n answers.
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(base + "/v1/quizzes/herd")
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Questions []struct{ Answers int } }
		json.NewDecoder(res.Body).Decode(&v)
		res.Body.Close()
		if len(v.Questions) == 1 && v.Questions[0].Answers == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("answers: %+v", v)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The close comes after the last answer's millisecond (an answer
	// stamped in the close's millisecond is late).
	for last := time.Now().UnixMilli(); time.Now().UnixMilli() <= last; {
		time.Sleep(time.Millisecond)
	}
	for _, action := range []string{"close", "reveal"} {
		if c := post(t, base+"/v1/quizzes/herd/"+action, ""); c != 200 {
			t.Fatalf("%s: %d", action, c)
		}
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	r := o.rep
	if r.Connected != n || r.QuestionFrames != n || r.Answered != n || r.Acked != n || len(r.Refused) != 0 || r.Standings != n || r.Dropped != 0 {
		t.Fatalf("report: %+v", r)
	}
	if r.OverheadP50Ms < -1 || r.AckMaxMs <= 0 {
		t.Fatalf("the node timed answers shorter than the participants waited: %+v", r)
	}
	if _, stderr, code := runCLI(t, "quiz", "swarm"); code != 2 || !strings.Contains(stderr, "--quiz is required") {
		t.Fatalf("no --quiz: %d %s", code, stderr)
	}
}

// The host runs a quiz from the command line: create it from its file,
// show it, start, close and reveal a question, end it; each prints the
// quiz, and a refusal is one line with exit 1.
func TestQuizHostCommands(t *testing.T) {
	t.Setenv("TALLY_TOKEN", "tok")
	base := startTestNode(t, t.TempDir())
	t.Setenv("TALLY_URL", base)
	file := filepath.Join(t.TempDir(), "quiz.json")
	os.WriteFile(file, []byte(`{"id":"pub","title":"Pub quiz","questions":[`+
		`{"text":"2+2?","options":[{"id":"a","label":"3"},{"id":"b","label":"4"}],"correct":["b"]},`+
		`{"text":"Paris?","options":[{"id":"y","label":"Yes"},{"id":"n","label":"No"}],"correct":["y"]}]}`), 0o600)
	run := func(want int, args ...string) string {
		t.Helper()
		out, stderr, code := runCLI(t, append([]string{"quiz"}, args...)...)
		if code != want {
			t.Fatalf("tally quiz %v: exit %d, want %d: %s%s", args, code, want, out, stderr)
		}
		return out + stderr
	}
	if out := run(0, "create", "--file", file); !strings.Contains(out, "status   ready") || !strings.Contains(out, "not started (hidden)") {
		t.Fatalf("create:\n%s", out)
	}
	if out := run(0, "start", "--quiz", "pub"); !strings.Contains(out, "status   question") || !strings.Contains(out, "started  1 of 2") {
		t.Fatalf("start:\n%s", out)
	}
	vote(t, base, "pub-1", "b", "ann")
	if out := run(0, "show", "--quiz", "pub"); !strings.Contains(out, "pub-1  open (hidden)") {
		t.Fatalf("show:\n%s", out)
	}
	for last := time.Now().UnixMilli(); time.Now().UnixMilli() <= last; { // past the answer's millisecond
		time.Sleep(time.Millisecond)
	}
	run(0, "close", "--quiz", "pub")
	if out := run(0, "reveal", "--quiz", "pub", "--json"); !strings.Contains(out, `"revealed":true`) {
		t.Fatalf("reveal --json:\n%s", out)
	}
	if out := run(0, "end", "--quiz", "pub"); !strings.Contains(out, "status   ended") {
		t.Fatalf("end:\n%s", out)
	}
	if out := run(1, "start", "--quiz", "pub"); !strings.Contains(out, "quiz_ended") || strings.Count(out, "\n") != 1 {
		t.Fatalf("start after the end:\n%s", out)
	}
	if out := run(1, "show", "--quiz", "nope"); !strings.Contains(out, "quiz_not_found") {
		t.Fatalf("an unknown quiz:\n%s", out)
	}
	if out := run(1, "create", "--file", file); !strings.Contains(out, "exists") {
		t.Fatalf("a duplicate:\n%s", out)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"id":"x","questions":[`), 0o600)
	if out := run(1, "create", "--file", bad); !strings.Contains(out, "bad.json: malformed JSON") || strings.Count(out, "\n") != 1 {
		t.Fatalf("a broken file:\n%s", out)
	}
	run(2, "start")
	run(2, "create")
	if out := run(0, "--help"); !strings.Contains(out, "reveal   --quiz ID") {
		t.Fatalf("help:\n%s", out)
	}
	t.Setenv("TALLY_TOKEN", "wrong")
	if out := run(1, "start", "--quiz", "pub"); !strings.Contains(out, "401") {
		t.Fatalf("a wrong token:\n%s", out)
	}
}
