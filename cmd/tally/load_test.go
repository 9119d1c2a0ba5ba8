package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/ingest"
)

func TestLoadSendsValidVotesWithRetries(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	bad := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		votes, err := ingest.DecodeVotes(body)
		mu.Lock()
		defer mu.Unlock()
		if err != nil || len(votes) != 3 || r.URL.Path != "/v1/polls/p/votes" {
			bad++
			w.WriteHeader(400)
			return
		}
		var out []string
		for _, v := range votes {
			status := "accepted"
			if seen[v.Idem]++; seen[v.Idem] > 1 {
				status = "duplicate"
			}
			out = append(out, `{"idem":"`+v.Idem+`","status":"`+status+`"}`)
		}
		w.Write([]byte(`{"results":[` + strings.Join(out, ",") + `]}`))
	}))
	defer srv.Close()
	rep, err := load(loadConfig{urls: []string{srv.URL}, poll: "p", rate: 200, duration: time.Second, batch: 3,
		voters: 50, changes: 0.3, retries: 0.3, connections: 4, options: []string{"a", "b"}}, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bad != 0 || rep.Requests < 150 || rep.Codes[200] != rep.Requests {
		t.Fatalf("bad %d, report %+v", bad, rep)
	}
	if rep.Acks["duplicate"] == 0 || rep.Acks["accepted"] == 0 || rep.Votes != 3*rep.Requests {
		t.Fatalf("acks %v votes %d requests %d", rep.Acks, rep.Votes, rep.Requests)
	}
	if rep.P50Ms <= 0 || rep.P999Ms < rep.P50Ms || rep.MaxMs < rep.P999Ms {
		t.Fatalf("percentiles %+v", rep)
	}
}

// --socket sends its votes as messages on live sockets, and every message
// sent is answered and timed; the node counts them.
func TestLoadOverSockets(t *testing.T) {
	base := startTestNode(t, t.TempDir())
	if c := post(t, base+"/v1/polls", `{"id":"p","question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":600}`); c != 201 {
		t.Fatalf("create: %d", c)
	}
	rep, err := loadSockets(loadConfig{urls: []string{base}, poll: "p", rate: 40, duration: time.Second, batch: 1,
		voters: 1000, connections: 8, options: []string{"a", "b"}}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests < 30 || rep.Codes[200]+rep.Errors != rep.Requests || rep.Acks["accepted"] == 0 || rep.P50Ms <= 0 {
		t.Fatalf("report %+v", rep)
	}
	if _, err := loadSockets(loadConfig{urls: []string{base}, poll: "p", rate: 1000, duration: time.Second, batch: 1, voters: 1, connections: 8, options: []string{"a"}}, io.Discard); err == nil {
		t.Fatal("125 messages a second a socket was not refused")
	}
}
