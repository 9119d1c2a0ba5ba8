package node

import (
	"testing"
	"time"
)

// The scenario of issue 14: voter v votes a at eu-west, then changes to b
// at us-east; voter w votes b at us-east and retries the same request at
// eu-west after a failover. Both regions used to show {"a":1,"b":3} until
// close while the certificate said {"b":2}. Now both converge to the
// certified result while the poll is open, the retry is answered
// duplicate with the original vote id, and after close the live tally
// equals the certificate everywhere (tally_live_certified_diff 0).
func TestLiveTallyFollowsVotersAcrossRegions(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, []string{"eu-west", "us-east"}, nil)
	eu, us := nodes[0], nodes[1]
	eu.createPoll(t, "p")
	havePoll(t, nodes, "p")

	if s, _ := eu.castVote(t, "p", "a", "v", "v-1"); s != "accepted" {
		t.Fatalf("v's first vote: %s", s)
	}
	agree(t, nodes, "p", map[string]int64{"a": 1, "b": 0, "c": 0})
	if s, _ := us.castVote(t, "p", "b", "v", "v-2"); s != "accepted" {
		t.Fatalf("v's change of mind: %s", s)
	}
	status, original := us.castVote(t, "p", "b", "w", "w-1")
	if status != "accepted" {
		t.Fatalf("w's vote: %s", status)
	}
	agree(t, nodes, "p", map[string]int64{"a": 0, "b": 2, "c": 0})

	// w's client fails over and retries at eu-west, which knows the key by now.
	status, id := eu.castVote(t, "p", "b", "w", "w-1")
	if status != "duplicate" || id != original {
		t.Fatalf("retry at the other region: %s %s, want duplicate %s", status, id, original)
	}
	agree(t, nodes, "p", map[string]int64{"a": 0, "b": 2, "c": 0})

	// A retry that races its own ballot (sent at both at once): whichever
	// answer each region gives, the tally counts it once.
	done := make(chan struct{})
	go func() { defer close(done); eu.castVote(t, "p", "c", "x", "x-1") }()
	us.castVote(t, "p", "c", "x", "x-1")
	<-done
	agree(t, nodes, "p", map[string]int64{"a": 0, "b": 2, "c": 1})

	advanceAll(nodes, 70*time.Second)
	v := certifiedEverywhere(t, nodes, "p")
	if v.Totals["a"] != 0 || v.Totals["b"] != 2 || v.Totals["c"] != 1 {
		t.Fatalf("certified %v", v.Totals)
	}
	agree(t, nodes, "p", map[string]int64{"a": 0, "b": 2, "c": 1})
	waitFor(t, func() bool { return metricValue(t, nodes, "tally_live_certified_diff", `poll="p"`) == 0 })
	// Every region comes to hold every ballot (5 records, or 6 when both
	// regions accepted the racing retry), as the record counts say.
	waitFor(t, func() bool {
		for _, n := range nodes {
			st, _ := n.state.Ballots("p")
			tally, _ := n.state.Tally("p")
			var records uint64
			for _, c := range tally.RecordCounts() {
				records += c
			}
			if records < 5 || uint64(st.Ballots) != records {
				return false
			}
		}
		return true
	})
}
