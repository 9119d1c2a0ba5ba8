package state

import (
	"errors"
	"strings"
	"testing"

	"tally/crdt"
	"tally/hlc"
)

// remote is a tally as gossip brings it: us-1's counts and records.
func remote(votes map[string]int64, records uint64) *crdt.Tally {
	t := crdt.NewTally()
	for o, n := range votes {
		t.Add("us-1", o, n)
	}
	t.AddRecords("us-1", records)
	return t
}

// restarted is a state on store holding poll p, as a node has it after the
// replay of its own ledger: eu-1 counted red twice and blue once.
func restarted(t *testing.T, store *memStore) *State {
	t.Helper()
	s, err := New(Config{Replica: "eu-1", Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Defs.Poll("p"); !ok {
		if _, err := s.Defs.PutPoll(def("p"), hlc.Timestamp{Wall: 1, Replica: "eu-1"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []string{"red", "red", "blue"} {
		if err := s.Count("p", o, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddRecords("p", 3); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTalliesOutliveARestart: what a node merged from the other replicas
// is kept, and a restart that replays only its own ledger gets it back —
// which replicas hold records and how many (so it certifies against them),
// and the number on air — while its own new votes still count.
func TestTalliesOutliveARestart(t *testing.T) {
	store := &memStore{}
	before := restarted(t, store)
	if _, err := before.Merge("p", remote(map[string]int64{"red": 4, "blue": 1}, 5)); err != nil {
		t.Fatal(err)
	}
	if n, err := before.SaveTallies(); n != 1 || err != nil {
		t.Fatalf("SaveTallies: %d %v", n, err)
	}
	if n, err := before.SaveTallies(); n != 0 || err != nil {
		t.Fatalf("SaveTallies of an unchanged tally wrote %d (%v)", n, err)
	}
	_, onAir, _ := before.Totals("p")

	after := restarted(t, store) // the restart: own ledger replayed, nothing from gossip yet
	if _, total, _ := after.Totals("p"); total != 3 {
		t.Fatalf("own replay alone shows %d", total)
	}
	if n, err := after.LoadTallies(); n != 1 || err != nil {
		t.Fatalf("LoadTallies: %d %v", n, err)
	}
	if _, total, _ := after.Totals("p"); total != onAir {
		t.Fatalf("after the restart %d on air, %d before", total, onAir)
	}
	known, _ := after.KnownRecords("p")
	if known["us-1"] != 5 || known["eu-1"] != 3 {
		t.Fatalf("known records after the restart: %v", known)
	}
	if err := after.Count("p", "blue", 1); err != nil {
		t.Fatal(err)
	}
	if _, total, _ := after.Totals("p"); total != onAir+1 {
		t.Fatalf("a vote after the restart: %d on air, want %d", total, onAir+1)
	}
}

// TestKeptTalliesDamagedOrGone: a kept tally that does not decode is
// reported, naming it, and the others load; one of a poll no longer held
// is deleted.
func TestKeptTalliesDamagedOrGone(t *testing.T) {
	store := &memStore{}
	s := restarted(t, store)
	if _, err := s.Defs.PutPoll(def("q"), hlc.Timestamp{Wall: 2, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge("q", remote(map[string]int64{"red": 1}, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveTallies(); err != nil {
		t.Fatal(err)
	}
	store.PutMeta(tallyPrefix+"p", []byte("TY1\xff\xff garbage"))
	store.PutMeta(tallyPrefix+"gone", []byte("whatever"))
	store.PutMeta(tallyPrefix+"empty", nil)
	r := restarted(t, store)
	n, err := r.LoadTallies()
	if n != 1 || !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), tallyPrefix+"p") {
		t.Fatalf("LoadTallies: %d %v", n, err)
	}
	if known, _ := r.KnownRecords("q"); known["us-1"] != 1 {
		t.Fatalf("the sound tally was not loaded: %v", known)
	}
	for name := range store.MetaWithPrefix(tallyPrefix + "gone") {
		t.Fatalf("%s kept for a poll not held", name)
	}
}

// BallotsMissing: the node knows of another replica's records whose
// ballots it does not hold; its own replica's missing ballots (records a
// restore lost) do not count, as they never arrive.
func TestBallotsMissing(t *testing.T) {
	s := restarted(t, &memStore{})
	if s.BallotsMissing("p", "eu-1") {
		t.Fatal("missing ballots with no other replica known")
	}
	if _, err := s.Merge("p", remote(map[string]int64{"red": 2}, 2)); err != nil {
		t.Fatal(err)
	}
	if !s.BallotsMissing("p", "eu-1") {
		t.Fatal("us-1 holds 2 records and none of their ballots is here: not reported missing")
	}
	for seq := uint64(1); seq <= 2; seq++ {
		if _, _, err := s.MergeBallots("p", []crdt.Ballot{{Replica: "us-1", Seq: seq, Wall: 10, Voter: seq, Idem: seq, Option: "red", Eligible: true}}); err != nil {
			t.Fatal(err)
		}
	}
	if s.BallotsMissing("p", "eu-1") {
		t.Fatal("every ballot held, still reported missing")
	}
	if s.BallotsMissing("nope", "eu-1") {
		t.Fatal("an unknown poll reported missing ballots")
	}
}
