package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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
