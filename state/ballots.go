package state

import (
	"slices"

	"tally/crdt"
	"tally/ids"
)

// maxOutbox bounds this replica's ballots waiting to be published: past
// it the oldest are dropped from the fast path (the others still learn
// them by catching up from this replica's chain).
const maxOutbox = 1 << 20

// Hash is the keyed 64-bit hash ballots carry instead of a voter id or an
// idempotency key: the same on every node of the cluster (HashKey), not
// choosable by a client who does not know the key. Two ids share a hash
// with odds of about 2^-64 per pair; certification uses the ids themselves.
func (s *State) Hash(id string) uint64 { return ids.Hash(s.hashKey, id) }

// mover returns the function that moves this replica's counters when a
// voter's counted ballot moves: a ballot of this replica that stops
// counting is retracted (N), one that starts counting is counted (P).
// Other replicas' ballots move their own counters, at their own nodes.
func (s *State) mover(ps *pollState) func(crdt.Change) {
	return func(c crdt.Change) {
		if c.FromReplica == s.replica {
			ps.local.add(c.FromOption, -1)
		}
		if c.ToReplica == s.replica {
			ps.local.add(c.ToOption, 1)
		}
	}
}

// Vote applies one of this replica's ballots (a vote just ledgered, or
// replayed) and queues it for publishing.
func (s *State) Vote(pollID string, b crdt.Ballot) error {
	ps, err := s.poll(pollID)
	if err != nil {
		return err
	}
	b.Replica = s.replica
	ps.bmu.Lock()
	defer ps.bmu.Unlock()
	if ps.ballots.Add(b, s.mover(ps)) {
		if len(ps.outbox) < maxOutbox {
			ps.outbox = append(ps.outbox, b)
		}
	}
	return nil
}

// MergeBallots applies ballots other replicas took and returns how many
// were new and how many it left out: ballots for an option the poll does
// not have, or of a replica past MaxReplicas.
func (s *State) MergeBallots(pollID string, bs []crdt.Ballot) (added, left int, err error) {
	ps, err := s.poll(pollID)
	if err != nil {
		return 0, 0, err
	}
	def, _ := s.Defs.Poll(pollID)
	ps.bmu.Lock()
	defer ps.bmu.Unlock()
	move := s.mover(ps)
	for _, b := range bs {
		option, ok := def.OptionID(b.Option)
		if !ok || !ps.ballots.Holds(b.Replica) && ps.ballots.ReplicaCount() >= MaxReplicas {
			left++
			continue
		}
		b.Option = option // the poll's own string: ballots share it
		if ps.ballots.Add(b, move) {
			added++
		}
	}
	return added, left, nil
}

// TakeBallots returns, per poll, up to max of this replica's ballots
// applied since the last call (the oldest first), and forgets them.
func (s *State) TakeBallots(max int) map[string][]crdt.Ballot {
	s.pmu.RLock()
	polls := make(map[string]*pollState, len(s.polls))
	for id, ps := range s.polls {
		polls[id] = ps
	}
	s.pmu.RUnlock()
	out := map[string][]crdt.Ballot{}
	for id, ps := range polls {
		ps.bmu.Lock()
		switch {
		case len(ps.outbox) > max:
			out[id] = slices.Clone(ps.outbox[:max])
			ps.outbox = slices.Delete(ps.outbox, 0, max)
		case len(ps.outbox) > 0:
			out[id], ps.outbox = ps.outbox, nil
		}
		ps.bmu.Unlock()
	}
	return out
}

// BallotsSince returns up to max of replica's ballots of the poll after
// Seq after, in order (for a node catching up).
func (s *State) BallotsSince(pollID, replica string, after uint64, max int) ([]crdt.Ballot, error) {
	ps, err := s.poll(pollID)
	if err != nil {
		return nil, err
	}
	ps.bmu.Lock()
	defer ps.bmu.Unlock()
	return ps.ballots.Since(replica, after, max), nil
}

// BallotsHave returns, for every replica with ballots in the poll, the
// Seq up to which this node holds all of them.
func (s *State) BallotsHave(pollID string) (map[string]uint64, error) {
	ps, err := s.poll(pollID)
	if err != nil {
		return nil, err
	}
	ps.bmu.Lock()
	defer ps.bmu.Unlock()
	out := map[string]uint64{}
	for _, r := range ps.ballots.Replicas() {
		out[r] = ps.ballots.Have(r)
	}
	return out, nil
}

// Answered reports whether the voter has any ballot in the poll, taken at
// any replica: a quiz participant who has answered the question.
func (s *State) Answered(pollID string, voter uint64) bool {
	ps, err := s.poll(pollID)
	if err != nil {
		return false
	}
	ps.bmu.Lock()
	defer ps.bmu.Unlock()
	return ps.ballots.Answered(voter)
}

// OpenedHere returns when the poll opened at this node (Unix ms, this
// node's clock): its opening time, or when its definition reached the
// node if that was later. A quiz answer's time runs from it when the
// node did not push the question to the participant itself.
func (s *State) OpenedHere(pollID string) (int64, bool) {
	def, ok := s.Defs.Poll(pollID)
	ps, err := s.poll(pollID)
	if !ok || err != nil {
		return 0, false
	}
	return max(def.OpensAt, ps.seenMs), true
}

// LatestWall returns the newest HLC wall time of the poll's ballots this
// node holds, from every replica; 0 for none.
func (s *State) LatestWall(pollID string) int64 {
	ps, err := s.poll(pollID)
	if err != nil {
		return 0
	}
	ps.bmu.Lock()
	defer ps.bmu.Unlock()
	return ps.ballots.LatestWall()
}

// BallotStats is the size of a poll's voter state.
type BallotStats struct {
	Ballots, Voters, Bytes int
	Totals                 map[string]int64 // what the ballots count, by option
}

// Ballots returns the size of the poll's voter state and what it counts.
func (s *State) Ballots(pollID string) (BallotStats, error) {
	ps, err := s.poll(pollID)
	if err != nil {
		return BallotStats{}, err
	}
	ps.bmu.Lock()
	defer ps.bmu.Unlock()
	return BallotStats{Ballots: ps.ballots.Len(), Voters: ps.ballots.Voters(), Bytes: ps.ballots.Bytes(), Totals: ps.ballots.Totals()}, nil
}

// SnapshotBallots returns the poll's ballots and this replica's (P, N) by
// option, taken together: the counters are exactly what the ballots make
// this replica count (for a checkpoint).
func (s *State) SnapshotBallots(pollID string) ([]crdt.Ballot, map[string][2]uint64, error) {
	ps, err := s.poll(pollID)
	if err != nil {
		return nil, nil, err
	}
	ps.bmu.Lock()
	defer ps.bmu.Unlock()
	counts := make(map[string][2]uint64, len(ps.local.options))
	for option, col := range ps.local.options {
		p, n := ps.local.sum(col)
		counts[option] = [2]uint64{p, n}
	}
	return ps.ballots.All(), counts, nil
}

// RestoreBallots puts ballots from a checkpoint back without moving any
// counter, then makes this replica's counters show exactly what the
// ballots make it count (raising P or N, never lowering either).
func (s *State) RestoreBallots(pollID string, bs []crdt.Ballot) error {
	ps, err := s.poll(pollID)
	if err != nil {
		return err
	}
	ps.bmu.Lock()
	defer ps.bmu.Unlock()
	for _, b := range bs {
		ps.ballots.Add(b, nil)
	}
	want := ps.ballots.Contribution(s.replica)
	for option, col := range ps.local.options {
		p, n := ps.local.sum(col)
		if d := want[option] - (int64(p) - int64(n)); d != 0 {
			ps.local.add(option, d)
		}
	}
	return nil
}
