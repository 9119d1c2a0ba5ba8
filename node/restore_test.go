package node

import (
	"bytes"
	"fmt"
	"iter"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/internal/backup"
	"tally/ledger"
)

// TestRestoreNeverLowersTheLiveTally: a region restored from a backup
// older than its last votes (two of them, one a change of mind) does not
// pull the number on air down, at the others or at itself (issue 26, item
// 3: it went from 7 to 6).
func TestRestoreNeverLowersTheLiveTally(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, []string{"eu", "us"}, nil)
	eu, us := nodes[0], nodes[1]
	if r := eu.admin(t, "POST", "/v1/polls", `{"id":"lost2","question":"?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":600}`); r.status != http.StatusCreated {
		t.Fatal(r.raw)
	}
	havePoll(t, nodes, "lost2")
	for i := range 3 {
		eu.castVote(t, "lost2", "a", fmt.Sprint("e", i), fmt.Sprint("ke", i))
		us.castVote(t, "lost2", "b", fmt.Sprint("u", i), fmt.Sprint("ku", i))
	}
	waitFor(t, func() bool { return eu.totals(t, "lost2")["_total"] == 6 })
	// Back up us.
	req, _ := http.NewRequest("GET", us.url+"/v1/backup", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := us.client.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("backup: %v %v", res, err)
	}
	bdir := filepath.Join(t.TempDir(), "backup")
	if _, err := backup.Extract(res.Body, bdir, 1<<30); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	us.castVote(t, "lost2", "b", "u9", "ku9")
	us.castVote(t, "lost2", "a", "u0", "ku0-again") // a change of mind after the backup
	// u0's change of mind moves one from b to a: wait for it, not only
	// for the seventh vote.
	waitFor(t, func() bool {
		got := eu.totals(t, "lost2")
		return got["_total"] == 7 && got["a"] == 4 && got["b"] == 3
	})
	before := eu.totals(t, "lost2")
	// eu holds the ballots of us's last votes too (they travel apart from
	// the counts): the lost votes' keys stay known in the cluster.
	waitFor(t, func() bool {
		return eu.state.Look("lost2", eu.state.Hash("u9"), eu.state.Hash("ku9")).IsRetry
	})
	ms := us.clock.ms.Load()
	if err := us.stop(); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "restored")
	if _, err := backup.Restore(bdir, data); err != nil {
		t.Fatal(err)
	}
	restored := startNodeAt(t, data, ms, func(c *Config) {
		c.Region, c.Join, c.PushPull = "us", []string{eu.GossipAddr()}, 500*time.Millisecond
	})
	waitFor(t, func() bool { return len(restored.gossip.Members()) == 2 })
	// Once both regions show the same tally, it is the one before the
	// restore: the higher entries stand.
	waitFor(t, func() bool {
		return fmt.Sprint(eu.totals(t, "lost2")) == fmt.Sprint(restored.totals(t, "lost2"))
	})
	if got := eu.totals(t, "lost2"); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("the tally on air went from %v to %v after the restore", before, got)
	}
	t.Logf("eu %v, restored us %v", eu.totals(t, "lost2"), restored.totals(t, "lost2"))

	// The restored node takes no new vote on the poll: its next record
	// would take the seq (the vote id) of a lost one. Another node does.
	r := restored.call(t, "POST", "/v1/polls/lost2/votes", vote("a", "u7", "ku7"))
	if r.status != http.StatusServiceUnavailable || r.code() != "records_lost" {
		t.Fatalf("a new vote at the restored node: %d %s", r.status, r.raw)
	}
	// A retry of a vote in the backup, and of a lost one, keep their ids.
	if res := result(t, restored.call(t, "POST", "/v1/polls/lost2/votes", vote("b", "u1", "ku1")), 0); res["status"] != "duplicate" {
		t.Fatalf("retry of a vote in the backup: %v", res)
	}
	// The lost vote's ballot lives at eu, not at the restored node (a
	// replica's node is the one that serves its ballots): the restored
	// node refuses the retry rather than answer it as new; eu answers it.
	if r := restored.call(t, "POST", "/v1/polls/lost2/votes", vote("b", "u9", "ku9")); r.status != http.StatusServiceUnavailable || r.code() != "records_lost" {
		t.Fatalf("retry of a lost vote at the restored node: %d %s", r.status, r.raw)
	}
	if res := result(t, eu.call(t, "POST", "/v1/polls/lost2/votes", vote("b", "u9", "ku9")), 0); res["status"] != "duplicate" || res["vote_id"] != restored.replica+"/4" {
		t.Fatalf("retry of a lost vote at eu: %v, want duplicate %s/4", res, restored.replica)
	}
	eu.castVote(t, "lost2", "a", "u7", "ku7") // the vote refused at the restored node, sent again at eu
	nodes = []*testNode{eu, restored}
	waitFor(t, func() bool { return restored.totals(t, "lost2")["_total"] == 8 })

	// Closed: certification waits for the two lost records, naming them,
	// until the operator certifies with what the backup holds.
	// The restored node started from its saved clock mark, ahead of the
	// wall clock, and moved the hybrid clocks with it: the close must come
	// after u7 by that clock (a vote in the close's millisecond is late).
	advanceAll(nodes, 10*time.Second)
	if r := eu.admin(t, "POST", "/v1/polls/lost2/close", ""); r.status != http.StatusOK {
		t.Fatal(r.raw)
	}
	advanceAll(nodes, 80*time.Second)
	waitFor(t, func() bool {
		v := eu.result(t, "lost2")
		return v.Status == "pending" && strings.Contains(v.Reason, restored.replica) && strings.Contains(v.Reason, "expected 5 records, received 3")
	})
	// An operator's slips are refused, and write nothing.
	for _, c := range []struct{ name, body, want string }{
		{"unknown replica", `{"accept_lost":["us"],"reason":"disk lost"}`, "has no replica us"},
		{"exclude of an unknown replica", `{"exclude":["us-0"],"reason":"disk lost"}`, "has no replica us-0"},
		{"blank reason", fmt.Sprintf(`{"accept_lost":[%q],"reason":"   "}`, restored.replica), "not blank"},
		{"a replica that lost nothing", fmt.Sprintf(`{"accept_lost":[%q,%q],"reason":"disk lost"}`, restored.replica, eu.replica), "nothing to accept as lost"},
	} {
		if r := eu.admin(t, "POST", "/v1/polls/lost2/certify", c.body); r.status != http.StatusBadRequest || !strings.Contains(r.raw, c.want) {
			t.Fatalf("%s: %d %s, want 400 %q", c.name, r.status, r.raw, c.want)
		}
	}
	if v := eu.result(t, "lost2"); v.Status != "pending" {
		t.Fatalf("a refused decision certified the poll: %+v", v)
	}
	// Closed: the restored node answers like any other.
	if r := restored.call(t, "POST", "/v1/polls/lost2/votes", vote("a", "u8", "ku8")); r.status != http.StatusConflict || r.code() != "poll_closed" {
		t.Fatalf("a vote on the closed poll at the restored node: %d %s", r.status, r.raw)
	}
	cert := eu.admin(t, "POST", "/v1/polls/lost2/certify", fmt.Sprintf(`{"accept_lost":[%q],"reason":"us disk lost at 21:04; restored from the 21:00 backup"}`, restored.replica))
	if cert.status != http.StatusOK {
		t.Fatal(cert.raw)
	}
	v := certifiedEverywhere(t, nodes, "lost2")
	// e0-e2, u7 for a; u0-u2 for b as the backup holds them (u0's change
	// of mind to a was lost).
	if v.Total != 7 || v.Totals["a"] != 4 || v.Totals["b"] != 3 {
		t.Fatalf("certified %v (total %d), want a 4, b 3; %+v", v.Totals, v.Total, *v.Detail.Result)
	}
	want := api.Lost{Replica: restored.replica, From: 4, To: 5, Count: 2, Reason: "us disk lost at 21:04; restored from the 21:00 backup"}
	if len(v.Detail.Lost) != 1 || v.Detail.Lost[0] != want || len(v.Detail.Excluded) != 0 {
		t.Fatalf("lost in the certificate: %+v, want %+v", v.Detail.Lost, want)
	}
	// Final: a second decision is refused, not silently ignored.
	if r := restored.admin(t, "POST", "/v1/polls/lost2/certify", fmt.Sprintf(`{"exclude":[%q],"reason":"second thoughts"}`, restored.replica)); r.status != http.StatusConflict || !strings.Contains(r.raw, "certified already") {
		t.Fatalf("a decision on a certified poll: %d %s", r.status, r.raw)
	}
	if r := restored.admin(t, "POST", "/v1/polls/lost2/certify", ""); r.status != http.StatusOK {
		t.Fatalf("certify of a certified poll without decisions: %d %s", r.status, r.raw)
	}
	// The auditor reproduces it from the two exports.
	var streams []iter.Seq2[ledger.Record, error]
	for _, e := range exports(t, nodes, "lost2") {
		streams = append(streams, ledger.ReadNDJSON(bytes.NewReader(e)))
	}
	def, _ := eu.state.Defs.Poll("lost2")
	mine, err := ledger.ReconcileWith(ledger.ReconcileConfig{Poll: "lost2", ClosesAt: def.ClosesAt, CloseRule: ledger.CloseByNode}, streams...)
	if err != nil || mine.Digest != v.Digest {
		t.Fatalf("the exports give %v (err %v), the certificate %s", mine, err, v.Digest)
	}
}
