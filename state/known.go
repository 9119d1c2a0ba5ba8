package state

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"tally/crdt"
)

// What a node knows of the other replicas outlives the process: each
// poll's tally — every replica's counter entries and record count, as
// merged — is kept in the Store (SaveTallies, a few hundred bytes a poll,
// only when it changed), and a start merges it back (LoadTallies). A node
// back from a crash therefore knows, before anyone answers it, which
// replicas hold records of each poll and how many, so it neither
// certifies from its own replica alone nor shows a smaller number on air
// than the one it last kept. The kept tally is a lower bound of the
// cluster's (a CRDT merged by max): loading an old one is always safe.

const tallyPrefix = "tally/"

// tallyStore is what a Store offers to keep the tallies cheaply: writes
// that reach the write-ahead log without an fsync of their own (the
// ledger's next group commit syncs them), and a delete for polls that
// left memory. Without it every save is a synced PutMeta.
type tallyStore interface {
	PutMetaBatch(names []string, values [][]byte, sync bool) error
	DeleteMetaRange(from, to string) error
}

// savedTallies is what SaveTallies last wrote, per poll.
type savedTallies struct {
	mu       sync.Mutex
	versions map[string]uint64   // poll → the tally version written
	replicas map[string][]string // poll → the replicas with records in it
}

// SaveTallies writes to the Store the tally of every poll that changed
// since the last call (a certified poll's once more after its
// certificate, then no longer), and returns how many it wrote. A poll in which a
// replica appears with records for the first time is written synced:
// that is the fact a restarted node must not lose.
func (s *State) SaveTallies() (int, error) {
	if s.store == nil {
		return 0, nil
	}
	s.saved.mu.Lock()
	defer s.saved.mu.Unlock()
	if s.saved.versions == nil {
		s.saved.versions, s.saved.replicas = map[string]uint64{}, map[string][]string{}
	}
	var names []string
	var values [][]byte
	sync := false
	for _, d := range s.Defs.Polls() {
		if _, done := s.saved.versions[d.ID]; done {
			if c, ok := s.Defs.Certificate(d.ID); ok && c.Status == Reconciled {
				continue // certified and kept: its number is the certificate's now
			}
		}
		ps, err := s.poll(d.ID)
		if err != nil {
			continue
		}
		ps.mu.Lock()
		s.fold(ps)
		v := ps.tally.Version()
		if done, ok := s.saved.versions[d.ID]; ok && done == v {
			ps.mu.Unlock()
			continue
		}
		b, err := ps.tally.MarshalBinary()
		withRecords := replicasWithRecords(ps.tally)
		ps.mu.Unlock()
		if err != nil {
			return 0, fmt.Errorf("%w: tally of %q: %w", ErrStore, d.ID, err)
		}
		if !slices.Equal(withRecords, s.saved.replicas[d.ID]) {
			sync = true
		}
		names, values = append(names, tallyPrefix+d.ID), append(values, b)
		s.saved.versions[d.ID], s.saved.replicas[d.ID] = v, withRecords
	}
	if len(names) == 0 {
		return 0, nil
	}
	if err := s.putMetas(names, values, sync); err != nil {
		for _, name := range names { // written again next time
			delete(s.saved.versions, name[len(tallyPrefix):])
		}
		return 0, err
	}
	return len(names), nil
}

// putMetas stores names[i] = values[i]: in one batch where the Store
// offers it, else one synced write each.
func (s *State) putMetas(names []string, values [][]byte, sync bool) error {
	if ts, ok := s.store.(tallyStore); ok {
		if err := ts.PutMetaBatch(names, values, sync); err != nil {
			return fmt.Errorf("%w: %w", ErrStore, err)
		}
		return nil
	}
	for i, name := range names {
		if err := s.store.PutMeta(name, values[i]); err != nil {
			return fmt.Errorf("%w: %w", ErrStore, err)
		}
	}
	return nil
}

// replicasWithRecords lists, sorted, the replicas t says hold records.
func replicasWithRecords(t *crdt.Tally) []string {
	var out []string
	for r, n := range t.RecordCounts() {
		if n > 0 {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// LoadTallies merges the tallies the Store keeps into the polls held, and
// returns how many it merged. Call it after the ledger's replay, so this
// replica's cells are raised above its own kept entries (Merge's lift).
// A kept tally that does not decode is reported in the error and skipped;
// one of a poll no longer held is deleted where the Store can.
func (s *State) LoadTallies() (int, error) {
	if s.store == nil {
		return 0, nil
	}
	loaded := 0
	var bad []string
	var gone []string
	for name, value := range s.store.MetaWithPrefix(tallyPrefix) {
		id := name[len(tallyPrefix):]
		if _, ok := s.Defs.Poll(id); !ok {
			gone = append(gone, id)
			continue
		}
		t, err := crdt.DecodeTally(value)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		if _, err := s.Merge(id, t); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		loaded++
	}
	if ts, ok := s.store.(tallyStore); ok {
		for _, id := range gone {
			_ = ts.DeleteMetaRange(tallyPrefix+id, tallyPrefix+id+"\x00")
		}
	}
	if len(bad) > 0 {
		return loaded, fmt.Errorf("%w: kept tallies not usable (their polls start from the ledger and gossip alone): %v", ErrStore, bad)
	}
	return loaded, nil
}

// KnownRecords returns, per replica, how many records of the poll this
// node knows it holds: the merged record counts, this replica's own
// included. A replica with none is left out.
func (s *State) KnownRecords(pollID string) (map[string]uint64, error) {
	t, err := s.Tally(pollID)
	if err != nil {
		return nil, err
	}
	out := t.RecordCounts()
	maps.DeleteFunc(out, func(_ string, n uint64) bool { return n == 0 })
	return out, nil
}

// BallotsMissing reports whether the node knows of records of the poll,
// at a replica other than own, whose ballots it does not hold yet: a key
// it has not seen may then be one another region took, and the node
// cannot tell a retry from a new vote. (Its own replica's ballots are its
// ledger's records; those a restore lost never arrive.)
func (s *State) BallotsMissing(pollID, own string) bool {
	known, err := s.KnownRecords(pollID)
	if err != nil {
		return false
	}
	have, err := s.BallotsHave(pollID)
	if err != nil {
		return false
	}
	for rep, n := range known {
		if rep != own && have[rep] < n {
			return true
		}
	}
	return false
}
