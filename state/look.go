package state

import "tally/crdt"

// VoteKey is one vote as its lookups need it: the voter and the
// idempotency key, as the client sent them.
type VoteKey struct{ Voter, Idem string }

// VoteLook is what one vote needs of its poll's voter state, read at
// once: its hashed voter and key (Hash), who holds the key, the key's
// ballot if it is this voter's retry, and the voter's latest and counted
// ballots, from any replica.
type VoteLook struct {
	Voter, Idem uint64

	KeyOwner uint64 // the voter whose ballot holds the key, if KeyHeld
	KeyHeld  bool

	Retry   crdt.Ballot // the earliest ballot under the key, if IsRetry: the one that counts for it
	IsRetry bool

	LatestWall    int64 // the voter's latest ballot, counted or not, if HasLatest
	LatestLogical uint32
	HasLatest     bool

	CountedWall int64 // the wall time of the voter's counted ballot, if HasCounted
	HasCounted  bool
}

// Conflict reports whether the vote's key holds another voter's vote: a
// key belongs to its voter (DESIGN invariant 2).
func (l VoteLook) Conflict() bool { return l.KeyHeld && l.KeyOwner != l.Voter }

// RequestLook is what a request's votes need of their poll: a VoteLook
// per vote, and this replica's record counts (OwnRecords).
type RequestLook struct {
	Votes              []VoteLook
	Held, Acknowledged uint64
}

// LookVotes reads everything a request's votes need of the poll's state,
// the voter state under one hold of its lock: the one read of the vote
// path before the ledger (ingest), in place of a call per question.
func (s *State) LookVotes(pollID string, keys []VoteKey) (RequestLook, error) {
	ps, err := s.poll(pollID)
	if err != nil {
		return RequestLook{}, err
	}
	out := RequestLook{Votes: make([]VoteLook, len(keys))}
	for i, k := range keys {
		out.Votes[i].Voter, out.Votes[i].Idem = s.Hash(k.Voter), s.Hash(k.Idem)
	}
	ps.bmu.Lock()
	for i := range out.Votes {
		ps.look(&out.Votes[i])
	}
	ps.bmu.Unlock()
	ps.mu.Lock()
	out.Held = ps.local.recordCount()
	out.Acknowledged = max(out.Held, ps.tally.Records(s.replica))
	ps.mu.Unlock()
	return out, nil
}

// Look is one vote's VoteLook by its hashed voter and key: what a vote
// the ledger answered as a duplicate is answered with. A poll the node
// does not hold looks empty.
func (s *State) Look(pollID string, voter, idem uint64) VoteLook {
	l := VoteLook{Voter: voter, Idem: idem}
	ps, err := s.poll(pollID)
	if err != nil {
		return l
	}
	ps.bmu.Lock()
	ps.look(&l)
	ps.bmu.Unlock()
	return l
}

// look fills l from the poll's ballots. Callers hold ps.bmu.
func (ps *pollState) look(l *VoteLook) {
	l.KeyOwner, l.KeyHeld = ps.ballots.IdemVoter(l.Idem)
	l.Retry, l.IsRetry = ps.ballots.Idem(l.Idem, l.Voter)
	l.LatestWall, l.LatestLogical, l.HasLatest = ps.ballots.Latest(l.Voter)
	l.CountedWall, l.HasCounted = ps.ballots.LastWall(l.Voter)
}
