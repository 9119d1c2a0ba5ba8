package state

import (
	"testing"

	"tally/crdt"
)

// A steward's correction of a gone replica's counters: the ballots say
// what it counts now, its own counters what it counted when it went; the
// correction is the difference, written only ever upwards (P and N), back
// to zero when stewardship ends, and it goes out with the gone replica's
// counters in this node's delta.
func TestStewardCorrectsAGoneReplica(t *testing.T) {
	s := newState(t, "s")
	def := hiddenPoll()
	def.Hidden = false
	if _, err := s.Defs.PutPoll(def, stamp(0, "eu")); err != nil {
		t.Fatal(err)
	}
	// The gone replica counted ten voters for a; four then voted b at x.
	gone := crdt.NewTally()
	var bs []crdt.Ballot
	for v := range 10 {
		gone.Add("g", "a", 1)
		bs = append(bs, crdt.Ballot{Replica: "g", Seq: uint64(v + 1), Wall: t0 + int64(v), Voter: uint64(100 + v), Idem: uint64(200 + v), Option: "a", Eligible: true})
	}
	for v := range 4 {
		bs = append(bs, crdt.Ballot{Replica: "x", Seq: uint64(v + 1), Wall: t0 + 1000 + int64(v), Voter: uint64(100 + v), Idem: uint64(300 + v), Option: "b", Eligible: true})
	}
	if _, err := s.Merge("p", gone); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.MergeBallots("p", bs); err != nil {
		t.Fatal(err)
	}
	value := func(option string) int64 {
		t.Helper()
		totals, _, err := s.Totals("p")
		if err != nil {
			t.Fatal(err)
		}
		return totals[option]
	}
	if got := value("a"); got != 10 {
		t.Fatalf("before: a %d, want the gone replica's 10", got)
	}
	target, err := s.Stewards().Contribution("p", "g")
	if err != nil || target["a"] != 6 {
		t.Fatalf("contribution %v %v, want a:6", target, err)
	}
	if changed, err := s.Stewards().Correct("p", "g", target); !changed || err != nil {
		t.Fatalf("steward: %v %v", changed, err)
	}
	if got := value("a"); got != 6 {
		t.Fatalf("corrected: a %d, want 6", got)
	}
	id := StewardID("g", "s")
	delta, _, err := s.OwnDelta("p", 0)
	if err != nil {
		t.Fatal(err)
	}
	if c := delta.Counter("a"); c.N.Get(id) != 4 || c.P.Get("g") != 10 {
		t.Fatalf("delta: correction N %d (want 4), gone replica's P %d (want 10, sent on with it)", c.N.Get(id), c.P.Get("g"))
	}
	if changed, _ := s.Stewards().Correct("p", "g", target); changed {
		t.Fatal("the same target changed the correction again")
	}
	if got := s.Stewards().Corrected("p"); len(got) != 1 || got[0] != "g" {
		t.Fatalf("stewarded %v, want [g]", got)
	}
	// Stewardship ends: back to zero, upwards.
	if changed, _ := s.Stewards().Correct("p", "g", nil); !changed {
		t.Fatal("ending stewardship changed nothing")
	}
	if got := value("a"); got != 10 {
		t.Fatalf("ended: a %d, want 10", got)
	}
	c := mustCounter(t, s, "p", "a")
	if c.P.Get(id) != 4 || c.N.Get(id) != 4 {
		t.Fatalf("ended: correction P %d N %d, want 4 4 (never lowered)", c.P.Get(id), c.N.Get(id))
	}
	if got := s.Stewards().Corrected("p"); len(got) != 0 {
		t.Fatalf("stewarded %v after the end, want none", got)
	}
}

func mustCounter(t *testing.T, s *State, pollID, option string) crdt.PNCounter {
	t.Helper()
	tally, err := s.Tally(pollID)
	if err != nil {
		t.Fatal(err)
	}
	return tally.Counter(option)
}
