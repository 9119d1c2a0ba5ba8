package node

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"tally/api"
)

// A voter's change of mind, acknowledged at another region after the vote
// it replaces, always counts — live and certified — however the two
// regions' clocks compare: the answer to a vote carries its stamp, and a
// client that sends it back as the next vote's "after" is stamped after
// it (issue 45, item 1). Found by an outside check: two votes stamped in
// the same millisecond at two regions, the tie went to the replica id and
// the replaced vote counted.
func TestChangeOfMindOrdersAfterTheVoteItReplaces(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		behind time.Duration // how far the second region's clock is behind the first's
	}{
		{"the same millisecond at both regions", 0},
		{"the second region's clock 50 ms behind", 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := startCluster(t, []string{"us", "eu"}, nil) // replica ids: us-… sorts after eu-…, so a tie went to us
			us, eu := nodes[0], nodes[1]
			eu.clock.advance(-tc.behind)
			us.createPoll(t, "p")
			havePoll(t, nodes, "p")
			eu.clock.advance(tc.behind) // eu opens the poll no earlier than us
			first := result(t, us.call(t, "POST", "/v1/polls/p/votes", vote("c", "v1", "k1")), 0)
			stamp, _ := first["stamp"].(string)
			if _, _, ok := api.ParseStamp(stamp); first["status"] != "accepted" || !ok {
				t.Fatalf("first vote: %v, want accepted with a stamp", first)
			}
			eu.clock.advance(-tc.behind)
			second := result(t, eu.call(t, "POST", "/v1/polls/p/votes",
				`{"option":"b","voter":"v1","idem":"k2","after":"`+stamp+`"}`), 0)
			if second["status"] != "accepted" || api.LaterStamp(stamp, second["stamp"].(string)) == stamp {
				t.Fatalf("second vote: %v, want accepted and stamped after %s", second, stamp)
			}
			eu.clock.advance(tc.behind)
			waitFor(t, func() bool {
				for _, n := range nodes {
					if tot := n.totals(t, "p"); tot["b"] != 1 || tot["c"] != 0 {
						return false
					}
				}
				return true
			})
			advanceAll(nodes, 70*time.Second)
			res := certifiedEverywhere(t, nodes, "p")
			if res.Totals["b"] != 1 || res.Totals["c"] != 0 {
				t.Fatalf("certified %v, want the change of mind (b) counted", res.Totals)
			}
		})
	}
}

// A stamp further ahead of the node's clock than the cluster's clocks may
// differ (or one that is not a stamp) is refused, and nothing is taken.
func TestAVoteStampedAheadIsRefused(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	n.createPoll(t, "p")
	now := n.clock.ms.Load()
	for _, tc := range []struct {
		after  string
		status int
		code   string
	}{
		{fmt.Sprintf("%d.0", now+10_000), http.StatusBadRequest, api.CodeStampAhead},
		{fmt.Sprintf("%d.0", now+1_500), http.StatusBadRequest, api.CodeStampAhead}, // within the clocks' 5 s, past a client's 1 s
		{"9223372036854775807.4294967295", http.StatusBadRequest, api.CodeStampAhead},
		{"NaN", http.StatusBadRequest, api.CodeInvalidRequest},
		{"1.2.3", http.StatusBadRequest, api.CodeInvalidRequest},
		{"-5.0", http.StatusBadRequest, api.CodeInvalidRequest},
		{"17647.99999999999", http.StatusBadRequest, api.CodeInvalidRequest},
		{strings.Repeat("1", 40) + ".0", http.StatusBadRequest, api.CodeInvalidRequest},
	} {
		r := n.call(t, "POST", "/v1/polls/p/votes", `{"option":"a","voter":"v1","idem":"k1","after":"`+tc.after+`"}`)
		if r.status != tc.status || !strings.Contains(r.raw, tc.code) {
			t.Errorf("after %q: %d %s, want %d %s", tc.after, r.status, r.raw, tc.status, tc.code)
		}
	}
	if tot := n.totals(t, "p"); tot["_total"] != 0 {
		t.Fatalf("refused votes counted: %v", tot)
	}
	// Within the bound (1 s) it is taken, stamped after it.
	after := fmt.Sprintf("%d.7", now+900)
	r := result(t, n.call(t, "POST", "/v1/polls/p/votes", `{"option":"a","voter":"v1","idem":"k1","after":"`+after+`"}`), 0)
	if r["status"] != "accepted" || r["stamp"] != fmt.Sprintf("%d.8", now+900) {
		t.Fatalf("a stamp 0.9 s ahead: %v, want accepted, stamped %d.8", r, now+900)
	}
}

// A vote acknowledged "accepted" in the millisecond a host closes the
// poll counts: the close takes effect after the votes stamped before it
// (found by an outside check: the close took the hybrid clock's
// millisecond, and such a vote was certified late).
func TestAVoteAcceptedInTheClosesMillisecondCounts(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	n.createPoll(t, "p")
	n.clock.advance(time.Second)
	if r := result(t, n.call(t, "POST", "/v1/polls/p/votes", vote("a", "v1", "k1")), 0); r["status"] != "accepted" {
		t.Fatalf("vote: %v", r)
	}
	if r := n.admin(t, "POST", "/v1/polls/p/close", ""); r.status != http.StatusOK {
		t.Fatalf("close: %d %s", r.status, r.raw)
	}
	advanceAll([]*testNode{n}, 10*time.Second)
	if res := certifiedEverywhere(t, []*testNode{n}, "p"); res.Totals["a"] != 1 || res.Total != 1 {
		t.Fatalf("certified %+v, want the vote acknowledged before the close counted", res)
	}
}

// A vote stamped ahead of the node's clock (after the stamp a region whose
// clock runs ahead gave the voter) and answered accepted counts when the
// host closes the poll at once at that node: the close comes after every
// stamp the node gave (found by an outside check: such votes were
// certified late, a change of mind lost).
func TestACloseComesAfterVotesStampedAhead(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	n.createPoll(t, "p")
	n.clock.advance(time.Second)
	now := n.clock.ms.Load()
	result(t, n.call(t, "POST", "/v1/polls/p/votes", vote("a", "w1", "k1")), 0)
	ahead := fmt.Sprintf("%d.0", now+900)
	for _, v := range []string{
		`{"option":"b","voter":"w1","idem":"k2","after":"` + ahead + `"}`,
		`{"option":"c","voter":"w2","idem":"k3","after":"` + ahead + `"}`,
	} {
		if r := result(t, n.call(t, "POST", "/v1/polls/p/votes", v), 0); r["status"] != "accepted" {
			t.Fatalf("%s: %v", v, r)
		}
	}
	r := n.admin(t, "POST", "/v1/polls/p/close", "")
	if r.status != http.StatusOK || r.body["closes_at"].(float64) <= float64(now+900) {
		t.Fatalf("close: %d %s, want closes_at after the stamps given (%d)", r.status, r.raw, now+900)
	}
	advanceAll([]*testNode{n}, 10*time.Second)
	if res := certifiedEverywhere(t, []*testNode{n}, "p"); res.Totals["a"] != 0 || res.Totals["b"] != 1 || res.Totals["c"] != 1 {
		t.Fatalf("certified %+v, want b 1 and c 1: every vote answered accepted counts", res)
	}
}

// The same when the host closes at another region, once the vote's ballot
// reached it: the close comes after every vote of the poll the closing
// node has heard of (found by an outside check: a close at another
// region 800 ms after votes stamped 900 ms ahead certified them late).
func TestACloseElsewhereComesAfterVotesStampedAhead(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, []string{"eu", "us"}, nil)
	eu, us := nodes[0], nodes[1]
	eu.createPoll(t, "p")
	havePoll(t, nodes, "p")
	advanceAll(nodes, time.Second)
	ahead := fmt.Sprintf("%d.0", eu.clock.ms.Load()+900)
	if r := result(t, eu.call(t, "POST", "/v1/polls/p/votes", `{"option":"b","voter":"w1","idem":"k1","after":"`+ahead+`"}`), 0); r["status"] != "accepted" {
		t.Fatalf("vote: %v", r)
	}
	waitFor(t, func() bool { return us.state.Look("p", us.state.Hash("w1"), us.state.Hash("k1")).IsRetry })
	if r := us.admin(t, "POST", "/v1/polls/p/close", ""); r.status != http.StatusOK {
		t.Fatalf("close at us: %d %s", r.status, r.raw)
	}
	advanceAll(nodes, 10*time.Second)
	if res := certifiedEverywhere(t, nodes, "p"); res.Totals["b"] != 1 {
		t.Fatalf("certified %+v, want the vote eu answered accepted counted", res)
	}
}
