package state

// The moments the quiz clock (quiz.Elapsed) reads: the node keeps, per
// question, the first moment it wrote the question to each participant
// it could name (the quiz stream's "join"), so a new socket never
// restarts their clock (DESIGN invariant 11). It is node-local and in
// memory: what crosses regions and restarts is the bound of
// quiz.AllowanceMs.

// maxShown bounds the participants remembered per question; past it new
// ones are not remembered (the bound still holds for them).
const maxShown = 1 << 21

// MarkShown records that the node put question poll pollID on voter's
// socket at ms (Unix ms, this node's clock); the first moment stays.
func (s *State) MarkShown(pollID, voter string, ms int64) {
	ps, err := s.poll(pollID)
	if err != nil || voter == "" || ms <= 0 {
		return
	}
	h := s.Hash(voter)
	ps.smu.Lock()
	defer ps.smu.Unlock()
	if ps.shown == nil {
		ps.shown = make(map[uint64]int64)
	}
	if first, ok := ps.shown[h]; ok && first <= ms {
		return
	} else if !ok && len(ps.shown) >= maxShown {
		return
	}
	ps.shown[h] = ms
}

// FirstShown returns when the node first put question pollID on the
// socket of the voter whose hash is voter, if it knows.
func (s *State) FirstShown(pollID string, voter uint64) (int64, bool) {
	ps, err := s.poll(pollID)
	if err != nil {
		return 0, false
	}
	ps.smu.Lock()
	defer ps.smu.Unlock()
	ms, ok := ps.shown[voter]
	return ms, ok
}
