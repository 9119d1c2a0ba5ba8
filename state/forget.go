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
func (d *Definitions) Forget(pollID string, atMs int64) error {
	if d.store != nil {
		if err := d.store.PutMeta(forgottenPrefix+pollID, []byte(strconv.FormatInt(atMs, 10))); err != nil {
			return fmt.Errorf("%w: %w", ErrStore, err)
		}
	}
	d.mu.Lock()
	if reg, ok := d.defs.Get(pollID); ok && reg.Value.Quiz != nil {
		q := reg.Value.Quiz.Quiz
		if delete(d.quizzes[q], pollID); len(d.quizzes[q]) == 0 {
			delete(d.quizzes, q)
		}
	}
	d.defs.Delete(pollID)
	delete(d.certs, pollID)
	if d.forgotten == nil {
		d.forgotten = map[string]struct{}{}
	}
	d.forgotten[pollID] = struct{}{}
	d.mu.Unlock()
	d.onForget(pollID) // the counts go after the definition: nothing finds counts without one
	return nil
}

// Forgotten reports whether the poll left memory (Forget).
func (d *Definitions) Forgotten(pollID string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	_, ok := d.forgotten[pollID]
	return ok
}

// loadForgotten reads the tombstones; called by New before definitions.
func (d *Definitions) loadForgotten() {
	for name := range d.store.MetaWithPrefix(forgottenPrefix) {
		if d.forgotten == nil {
			d.forgotten = map[string]struct{}{}
		}
		d.forgotten[name[len(forgottenPrefix):]] = struct{}{}
	}
}
