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

// One participant holds one name at a time: a script that joins under
// name after name on one token reserves only its last, and the names it
// gave up are free for the people they belong to (issue 58's review).
func TestQuizNamesOnePerParticipant(t *testing.T) {
	s, _ := New(Config{Replica: "eu-1"})
	if _, err := s.Defs.PutPoll(question("qz", 0, 1_800_000_000_000), hlc.Timestamp{Wall: 5, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	squatted := []string{"Maria", "Elena", "Liam", "Noah", "Olivia"}
	for _, name := range squatted {
		if err := s.Names.Claim("qz", "squatter", name); err != nil {
			t.Fatalf("the squatter's %q: %v", name, err)
		}
	}
	for _, name := range squatted[:len(squatted)-1] {
		if err := s.Names.Claim("qz", "owner-of-"+name, name); err != nil {
			t.Errorf("%q, given up by the squatter, refused to its owner: %v", name, err)
		}
	}
	if err := s.Names.Claim("qz", "someone", "Olivia"); !errors.Is(err, ErrLookAlike) {
		t.Errorf("the name the squatter holds now: %v", err)
	}
	// Taking a name back that someone else took meanwhile is refused, and
	// the participant keeps the one they hold.
	if err := s.Names.Claim("qz", "squatter", "Maria"); !errors.Is(err, ErrLookAlike) {
		t.Errorf("a name given up and taken since: %v", err)
	}
	if err := s.Names.Claim("qz", "someone", "Olivia"); !errors.Is(err, ErrLookAlike) {
		t.Errorf("a refused change gave up the name held: %v", err)
	}
}
