package node

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRetryAfterTheClose: a retry of an acknowledged key gets its first
// answer whatever the time: in the grace window, after it, and after the
// certificate, at the node that acknowledged it and at another that knows
// the key (issue 26, item 2).
func TestRetryAfterTheClose(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, []string{"eu", "us"}, nil)
	eu, us := nodes[0], nodes[1]
	eu.createPoll(t, "p")
	havePoll(t, nodes, "p")
	first := eu.call(t, "POST", "/v1/polls/p/votes", `{"option":"a","voter":"v1","idem":"k1"}`)
	if first.status != http.StatusOK {
		t.Fatalf("vote: %d %s", first.status, first.raw)
	}
	id := first.body["results"].([]any)[0].(map[string]any)["vote_id"]
	waitFor(t, func() bool { // us has the vote's ballot: it knows the key
		return us.state.Look("p", us.state.Hash("v1"), us.state.Hash("k1")).IsRetry
	})
	retry := func(when string) {
		t.Helper()
		for _, n := range nodes {
			r := n.call(t, "POST", "/v1/polls/p/votes", `{"option":"a","voter":"v1","idem":"k1"}`)
			var got any
			if r.status == http.StatusOK {
				res := r.body["results"].([]any)[0].(map[string]any)
				got = fmt.Sprint(res["status"], " ", res["vote_id"])
			}
			if r.status != http.StatusOK || got != fmt.Sprint("duplicate ", id) {
				t.Errorf("%s, at %s: %d %s, want duplicate %v", when, n.replica, r.status, r.raw, id)
			}
		}
	}
	retry("while open")
	advanceAll(nodes, 61*time.Second) // closed (60 s), in the grace window (5 s)
	retry("in the grace window")
	advanceAll(nodes, 10*time.Second)
	retry("after the grace window")
	certifiedEverywhere(t, nodes, "p")
	retry("after the certificate")
}

// TestRetryAfterARestart: 20 votes acknowledged at eu are retried at us
// (duplicate, eu's ids); us is killed with SIGKILL and restarted, and the
// same retries at once at the restarted us get the same answers — never a
// new vote id of us (issue 26, item 1). Until us holds eu's ballots again
// it answers 503 with Retry-After, which a client retries.
func TestRetryAfterARestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	bin := buildNodeBinary(t)
	eu, dir, flags := regionAndProcessFlags(t)
	us := startProcess(t, bin, dir, flags...)
	ids := map[string]any{}
	for i := range 20 {
		key := fmt.Sprintf("k%d", i)
		r := result(t, eu.call(t, "POST", "/v1/polls/p/votes", vote("a", "v"+key, key)), 0)
		ids[key] = r["vote_id"]
	}
	// answer retries key at us until it is not 503 (a bounded wait).
	answer := func(key string) map[string]any {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, raw, err := post(us.url+"/v1/polls/p/votes", vote("a", "v"+key, key))
			var body map[string]any
			json.Unmarshal(raw, &body)
			if err == nil && code == http.StatusOK {
				return body["results"].([]any)[0].(map[string]any)
			}
			if time.Now().After(deadline) || err == nil && code != http.StatusServiceUnavailable && code != http.StatusNotFound {
				t.Fatalf("retry of %s at us: %d %v %v", key, code, body, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor(t, func() bool { // us holds eu's 20 ballots
		res, err := http.Get(us.url + "/metrics")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return strings.Contains(string(raw), `tally_voter_state_ballots{poll="p"} 20`)
	})
	for key, id := range ids {
		if r := answer(key); r["status"] != "duplicate" || r["vote_id"] != id {
			t.Fatalf("retry of %s at us before the restart: %v, want duplicate %v", key, r, id)
		}
	}
	if err := us.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	us.cmd.Wait()
	us = startProcessNoWait(t, bin, dir, flags...)
	for key, id := range ids {
		if r := answer(key); r["status"] != "duplicate" || r["vote_id"] != id {
			t.Errorf("retry of %s at the restarted us: %v, want duplicate %v", key, r, id)
		}
	}
	for line := range strings.Lines(us.log.String()) {
		if strings.Contains(line, "caught up") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

// TestCatchUpOpensWithoutRequests: a node that joins opens its catch-up
// gate by itself once it holds the others' ballots — tally_ready turns 1
// and the gate's log tells the real time — with nobody calling /readyz or
// voting.
func TestCatchUpOpensWithoutRequests(t *testing.T) {
	nodes := startCluster(t, []string{"eu", "us"}, func(i int, c *Config) {
		if i == 1 {
			c.CatchUpWait = time.Minute
		}
	})
	us := nodes[1]
	gauge := func() float64 {
		mfs, err := us.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "tally_ready" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	waitFor(t, func() bool { return gauge() == 1 })
	if !us.caughtUp.Load() || counterValue(t, us, "tally_catch_up_timeouts_total", "") != 0 {
		t.Fatal("the gate opened by timing out, not by catching up")
	}
}
