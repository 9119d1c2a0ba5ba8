package state

import (
	"errors"
	"testing"

	"tally/hlc"
)

// A quiz's names: a name that looks like another participant's is
// refused, whoever took it first and wherever (a join here, another
// replica's lobby report); the participant who holds it takes it again;
// a name checked is not kept; other quizzes have their own names.
func TestQuizNamesLookAlike(t *testing.T) {
	s, _ := New(Config{Replica: "eu-1"})
	const parked = 1_800_000_000_000
	for _, q := range []string{"qz", "other"} {
		if _, err := s.Defs.PutPoll(question(q, 0, parked), hlc.Timestamp{Wall: 5, Replica: "eu-1"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Names.Claim("qz", "ann-1", "Ann"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Аnn", "ANN", "ann", "Ann"} { // a Cyrillic А; case; the name itself
		if err := s.Names.Claim("qz", "mallory", name); !errors.Is(err, ErrLookAlike) {
			t.Errorf("%q taken by another participant: %v", name, err)
		}
		if err := s.Names.Check("qz", "mallory", name); !errors.Is(err, ErrLookAlike) {
			t.Errorf("%q checked for another participant: %v", name, err)
		}
	}
	for _, name := range []string{"Ann", "ANN", "Annie"} { // Ann again, in capitals, another name of hers
		if err := s.Names.Claim("qz", "ann-1", name); err != nil {
			t.Errorf("Ann's own %q refused: %v", name, err)
		}
	}
	if err := s.Names.Claim("other", "mallory", "Аnn"); err != nil {
		t.Errorf("another quiz's name refused: %v", err)
	}
	if err := s.Names.Claim("nope", "mallory", "Аnn"); err != nil {
		t.Errorf("a quiz not held here: %v", err)
	}
	// Checked, not kept: Zoë is still free for anyone.
	if err := s.Names.Check("qz", "zoe-1", "Zoë"); err != nil {
		t.Fatal(err)
	}
	if err := s.Names.Claim("qz", "zoe-2", "Zoë"); err != nil {
		t.Errorf("a name only checked was kept: %v", err)
	}
	// Another replica's lobby report: its joiners' names are theirs here
	// too; one that says no holder (an older node) keeps nothing.
	s.Audience.MergeJoiners("qz-1", "us-1", []Joiner{{Name: "Ιan", AtMs: 1, Seq: 1, Holder: s.Hash("ian-1")}, {Name: "Cleo", AtMs: 1, Seq: 2}}, 1000)
	if err := s.Names.Claim("qz", "mallory", "Ian"); !errors.Is(err, ErrLookAlike) { // Latin I, the report's Greek Ι
		t.Errorf("a look-alike of a reported joiner's name: %v", err)
	}
	if err := s.Names.Claim("qz", "ian-1", "Ian"); err != nil {
		t.Errorf("the reported joiner's own name refused: %v", err)
	}
	if err := s.Names.Claim("qz", "mallory", "Cleo"); err != nil {
		t.Errorf("a name reported with no holder was kept: %v", err)
	}
}
