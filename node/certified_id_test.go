package node

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"tally/api"
	"tally/ledger"
)

// TestRetryAnswersTheCertifiedRecordEverywhere: one key ledgered at two
// regions — its retry reached us-east while us-east was cut off from
// eu-west, so us-east took it as new — is answered, once the ballots
// have spread, with the one record certification keeps (the earliest by
// HLC) at both full nodes and at an edge of each region: while the poll
// is open and after the certificate, whichever region holds the later
// record (issue 59).
func TestRetryAnswersTheCertifiedRecordEverywhere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		usEarly bool // us-east, the region cut off, ledgers the key first by HLC
	}{
		{"the cut-off region ledgers the later record", false},
		{"the cut-off region ledgers the earlier record", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := startCluster(t, []string{"eu-west", "us-east"}, nil)
			eu, us := nodes[0], nodes[1]
			eu.createPollFor(t, "p", 3600)
			havePoll(t, nodes, "p")

			// us-east stops and comes back alone: cut off, it hears of no
			// ballot of eu-west's.
			dir, name := us.cfg.DataDir, us.cfg.NodeName
			if err := us.stop(); err != nil {
				t.Fatal(err)
			}
			alone := startNodeAt(t, dir, eu.clock.ms.Load(), func(c *Config) { c.Region, c.NodeName = "us-east", name })
			// A restart resumes above its clock's saved mark (a second
			// ahead at most): the two votes are stamped 5 s apart.
			body := vote("a", "v1", "k1")
			castAt := func(n *testNode, after time.Duration) {
				t.Helper()
				n.clock.advance(after)
				if r := result(t, n.call(t, "POST", "/v1/polls/p/votes", body), 0); r["status"] != "accepted" {
					t.Fatalf("the vote at %s: %v, want accepted", n.replica, r)
				}
			}
			if tc.usEarly {
				castAt(alone, 5*time.Second)
				castAt(eu, 10*time.Second)
			} else {
				castAt(eu, 5*time.Second)
				castAt(alone, 10*time.Second)
			}
			if err := alone.stop(); err != nil {
				t.Fatal(err)
			}
			eu.clock.ms.Store(max(eu.clock.ms.Load(), alone.clock.ms.Load()) + 1000) // one time again
			us = startNodeAt(t, dir, eu.clock.ms.Load(), func(c *Config) {
				c.Region, c.NodeName, c.Join, c.PushPull = "us-east", name, []string{eu.GossipAddr()}, 500*time.Millisecond
			})
			nodes = []*testNode{eu, us}
			var edges []*testNode
			for _, region := range []string{"eu-west", "us-east"} {
				edges = append(edges, startNode(t, t.TempDir(), func(c *Config) {
					c.Region, c.Role, c.AdminToken, c.Join = region, "edge", "", []string{eu.GossipAddr()}
					c.Now = eu.clock.now
				}))
			}
			waitFor(t, func() bool { // the ballots spread: both records at both full nodes
				for _, n := range nodes {
					if b, err := n.state.Ballots("p"); err != nil || b.Ballots != 2 {
						return false
					}
				}
				for _, e := range edges {
					if len(e.gossip.Members()) != 4 {
						return false
					}
				}
				return true
			})

			// What certification keeps: the earliest record under the key.
			var kept *ledger.Record
			for _, n := range nodes {
				for _, r := range ledgerAt(t, n.url, "/v1/polls/p/ledger") {
					if r.Idem == "k1" && (kept == nil || kept.After(&r)) {
						kept = &r
					}
				}
			}
			if kept == nil {
				t.Fatal("the key is in no ledger")
			}
			if wantAt := map[bool]string{true: us.replica, false: eu.replica}[tc.usEarly]; kept.Replica != wantAt {
				t.Fatalf("the earliest record is %s's, want %s's: the test's clocks are wrong", kept.Replica, wantAt)
			}
			want := fmt.Sprintf("duplicate %s/%d %s", kept.Replica, kept.Seq, api.FormatStamp(kept.Wall, kept.Logical))
			retries := func(when string) {
				t.Helper()
				for i, n := range append(append([]*testNode{}, nodes...), edges...) {
					where := n.replica
					if i >= len(nodes) {
						where = "the edge of " + n.cfg.Region
					}
					var got string
					// An edge answers 503 until it reaches a full node, and 504
					// when the full node's answer was late (a starved machine):
					// the client's contract is to send the same request again.
					waitFor(t, func() bool {
						r := n.call(t, "POST", "/v1/polls/p/votes", body)
						if r.status != http.StatusOK {
							got = strconv.Itoa(r.status) + " " + r.raw
							return r.status != http.StatusServiceUnavailable && r.status != http.StatusGatewayTimeout
						}
						res := r.body["results"].([]any)[0].(map[string]any)
						got = fmt.Sprint(res["status"], " ", res["vote_id"], " ", res["stamp"])
						return true
					})
					if got != want {
						t.Errorf("%s, a retry at %s: %s, want %s (the record certification keeps)", when, where, got, want)
					}
				}
			}
			retries("open")

			if r := eu.admin(t, "POST", "/v1/polls/p/close", ""); r.status != http.StatusOK {
				t.Fatalf("close: %d %s", r.status, r.raw)
			}
			for _, n := range nodes {
				n.closeTakesEffect(t, "p")
			}
			advanceAll(nodes, 10*time.Second) // past the grace
			v := certifiedEverywhere(t, nodes, "p")
			if res := v.Detail.Result; res == nil || res.Records != 2 || res.Duplicates != 1 || v.Totals["a"] != 1 {
				t.Fatalf("certified %v, detail %+v: want the key's two records, one a duplicate, a=1", v.Totals, res)
			}
			retries("after the certificate")
		})
	}
}
