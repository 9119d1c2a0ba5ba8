package state

import (
	"fmt"
	"strconv"
)

// forgottenPrefix names the persisted tombstones of polls that left memory.
const forgottenPrefix = "forgotten/"

// Forget drops a poll from memory: its definition, counts and certificate.
// The node calls it once a poll is certified and past retention; its
// records and certificate stay on disk (the ledger and its export). A
// tombstone, persisted, keeps gossip and restarts from bringing it back.
func (s *State) Forget(pollID string, atMs int64) error {
	if s.store != nil {
		if err := s.store.PutMeta(forgottenPrefix+pollID, []byte(strconv.FormatInt(atMs, 10))); err != nil {
			return fmt.Errorf("%w: %w", ErrStore, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if reg, ok := s.defs.Get(pollID); ok && reg.Value.Quiz != nil {
		q := reg.Value.Quiz.Quiz
		if delete(s.quizzes[q], pollID); len(s.quizzes[q]) == 0 {
			delete(s.quizzes, q)
		}
	}
	s.defs.Delete(pollID)
	delete(s.polls, pollID)
	delete(s.certs, pollID)
	if s.forgotten == nil {
		s.forgotten = map[string]struct{}{}
	}
	s.forgotten[pollID] = struct{}{}
	return nil
}

// Forgotten reports whether the poll left memory (Forget).
func (s *State) Forgotten(pollID string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.forgotten[pollID]
	return ok
}

// loadForgotten reads the tombstones; called by New before definitions.
func (s *State) loadForgotten() {
	for name := range s.store.MetaWithPrefix(forgottenPrefix) {
		if s.forgotten == nil {
			s.forgotten = map[string]struct{}{}
		}
		s.forgotten[name[len(forgottenPrefix):]] = struct{}{}
	}
}
