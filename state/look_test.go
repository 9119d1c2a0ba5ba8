package state

import (
	"testing"

	"tally/crdt"
	"tally/hlc"
)

// LookVotes reads, for each vote at once, who holds its key, whether it is
// the voter's retry, and the voter's latest and counted ballots, from this
// replica's ballots and another's alike; and the poll's own record counts.
func TestLookVotesReadsWhatAVoteNeeds(t *testing.T) {
	s := newState(t, "eu-1")
	if _, err := s.Defs.PutPoll(def("p"), hlc.Timestamp{Wall: 1, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	h := s.Hash
	// ann voted red with k1 here, then blue with k2 at us-1 (later: it counts).
	if err := s.AddRecords("p", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Vote("p", crdt.Ballot{Seq: 1, Wall: 100, Voter: h("ann"), Idem: h("k1"), Option: "red", Eligible: true}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.MergeBallots("p", []crdt.Ballot{{Replica: "us-1", Seq: 1, Wall: 200, Logical: 3, Voter: h("ann"), Idem: h("k2"), Option: "blue", Eligible: true}}); err != nil {
		t.Fatal(err)
	}
	look, err := s.LookVotes("p", []VoteKey{{"ann", "k1"}, {"ann", "k2"}, {"bob", "k1"}, {"bob", "k9"}})
	if err != nil {
		t.Fatal(err)
	}
	if look.Held != 1 || look.Acknowledged != 1 {
		t.Fatalf("own records %d held, %d acknowledged, want 1 and 1", look.Held, look.Acknowledged)
	}
	for i, tc := range []struct {
		name                    string
		conflict, retry         bool
		retryReplica            string
		latest, counted         bool
		latestWall, countedWall int64
		latestLogical           uint32
	}{
		{name: "ann's first key, here", retry: true, retryReplica: "eu-1", latest: true, latestWall: 200, latestLogical: 3, counted: true, countedWall: 200},
		{name: "ann's second key, at us-1", retry: true, retryReplica: "us-1", latest: true, latestWall: 200, latestLogical: 3, counted: true, countedWall: 200},
		{name: "bob reusing ann's key", conflict: true},
		{name: "bob's new key"},
	} {
		l := look.Votes[i]
		if l.Voter != h([]string{"ann", "ann", "bob", "bob"}[i]) || l.Conflict() != tc.conflict || l.IsRetry != tc.retry ||
			tc.retry && l.Retry.Replica != tc.retryReplica ||
			l.HasLatest != tc.latest || l.LatestWall != tc.latestWall || l.LatestLogical != tc.latestLogical ||
			l.HasCounted != tc.counted || l.CountedWall != tc.countedWall {
			t.Errorf("%s: %+v, want %+v", tc.name, l, tc)
		}
		if again := s.Look("p", l.Voter, l.Idem); again != l {
			t.Errorf("%s: Look %+v, LookVotes %+v", tc.name, again, l)
		}
	}
	if _, err := s.LookVotes("nope", []VoteKey{{"ann", "k1"}}); err == nil {
		t.Fatal("a poll the node does not hold: no error")
	}
	if l := s.Look("nope", h("ann"), h("k1")); l.KeyHeld || l.IsRetry || l.HasLatest {
		t.Fatalf("a poll the node does not hold looks %+v", l)
	}
}
