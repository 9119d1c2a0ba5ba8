package state

import (
	"errors"
	"fmt"

	"tally/names"
)

// A quiz's names: every display name the node has seen a participant of
// the quiz take — a join at its sockets, an answer it took, a name in
// another replica's lobby report (MergeJoiners) — under its look-alike
// keys (names.Keys), so that a name looking like another participant's is
// refused (docs/quiz.md, "How names are compared"). The names are kept on
// the quiz's first question, as its joiners are, node-local and in
// memory, and go when that poll is forgotten.

// ErrLookAlike is returned by Names.Claim and Names.Check for a display
// name that looks like a name another participant of the quiz took.
var ErrLookAlike = errors.New("state: looks like another participant's name")

// maxQuizNames bounds the names kept per quiz; past it a name is still
// compared with those kept, but not kept.
const maxQuizNames = 1 << 17

// nameBook is what a quiz's first question keeps of its names.
type nameBook struct {
	holders map[string]uint64 // a look-alike key → the participant (Hash of the voter id) who holds it
	taken   map[string]uint64 // a name as taken → its participant: a name taken again costs no keys
	held    map[uint64]string // a participant → the one name they hold
}

// Names are the display names the participants of each quiz took, as
// this node knows them. Safe for concurrent use.
type Names struct{ s *State }

// Claim takes a display name (in its normal form, api.NormalName) for
// voter in quiz quizID: refused with ErrLookAlike when it looks like a
// name another participant took (they share a names.Keys key), else kept
// as theirs. A participant may take their own name again; a participant
// holds one name at a time, so taking another gives up the one before (a
// script cannot reserve names by the hundred on one token). A quiz this
// node does not hold has no names: nil.
func (n Names) Claim(quizID, voter, name string) error { return n.take(quizID, voter, name, true) }

// Check is Claim without keeping the name: whether voter may take it.
func (n Names) Check(quizID, voter, name string) error { return n.take(quizID, voter, name, false) }

func (n Names) take(quizID, voter, name string, keep bool) error {
	qs := n.s.Defs.QuizQuestions(quizID)
	if len(qs) == 0 || voter == "" || name == "" {
		return nil
	}
	ps, err := n.s.poll(qs[0].ID)
	if err != nil {
		return nil
	}
	return ps.takeName(n.s.Hash(voter), name, keep)
}

// takeName is Names.Claim (keep) or Names.Check on the quiz's first question
// ps, for the participant whose voter id hashes to holder.
func (ps *pollState) takeName(holder uint64, name string, keep bool) error {
	ps.nmu.Lock()
	h, seen := ps.names.taken[name]
	ps.nmu.Unlock()
	if seen && h == holder {
		return nil
	}
	keys := names.Keys(name) // the costly part, outside the lock
	ps.nmu.Lock()
	defer ps.nmu.Unlock()
	for _, k := range keys {
		if h, ok := ps.names.holders[k]; ok && h != holder {
			return fmt.Errorf("%w: %q", ErrLookAlike, name)
		}
	}
	if !keep || len(ps.names.taken) >= maxQuizNames {
		return nil
	}
	if ps.names.taken == nil {
		ps.names = nameBook{holders: map[string]uint64{}, taken: map[string]uint64{}, held: map[uint64]string{}}
	}
	if before, ok := ps.names.held[holder]; ok {
		ps.names.release(holder, before)
	}
	ps.names.taken[name] = holder
	ps.names.held[holder] = name
	for _, k := range keys {
		ps.names.holders[k] = holder
	}
	return nil
}

// release gives up the name holder held: its keys go where holder holds
// them (names.Keys of a name already taken, under the book's lock: a
// change of name is rare).
func (b *nameBook) release(holder uint64, name string) {
	delete(b.taken, name)
	delete(b.held, holder)
	for _, k := range names.Keys(name) {
		if b.holders[k] == holder {
			delete(b.holders, k)
		}
	}
}
