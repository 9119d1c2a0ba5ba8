package state

import (
	"strings"
)

// A replica whose node is gone — killed with its disk, drained, replaced —
// no longer moves its counters: when a voter it counted votes again
// elsewhere, nobody retracts the old vote, and the live tally runs above
// what certification will say (every ballot is still held, so the
// certificate is right; the number on air is not). So one live full node,
// the gone replica's steward (gossip decides which), corrects it: under a
// tally component of its own, StewardID(lost, steward), it holds the
// difference between what the ballots say the gone replica counts now
// (its voters' counted ballots, certification's rule) and what the gone
// replica's own counters last said. The steward alone writes that
// component, so counters stay single-writer CRDT counters; when its
// stewardship ends (the replica is back, or another node is steward) it
// brings its correction back to zero.

// stewardSep joins a gone replica's id and its steward's in a component's
// id: ids hold no ".." of their own (replica ids are region-hex).
const stewardSep = ".."

// StewardID is the tally component through which steward corrects the
// counters of lost. It may be longer than an id allows (ids.MaxLen); the
// caller checks (gossip refuses to steward then, and says so).
func StewardID(lost, steward string) string { return lost + stewardSep + steward }

// stewardedBy reports whether component id is a correction steward writes.
func stewardedBy(id, steward string) bool {
	return strings.HasSuffix(id, stewardSep+steward) && len(id) > len(stewardSep+steward)
}

// Stewards is what a steward of gone replicas reads and writes of the
// state (gossip's steward loop).
type Stewards struct{ s *State }

// Stewards returns the state's stewarding side.
func (s *State) Stewards() Stewards { return Stewards{s} }

// Contribution returns, per option, how many voters' counted ballot is
// one replica took (certification's rule, over the ballots held): what
// that replica's counters must show. One pass over the poll's voters.
func (w Stewards) Contribution(pollID, replica string) (map[string]int64, error) {
	s := w.s
	ps, err := s.poll(pollID)
	if err != nil {
		return nil, err
	}
	ps.bmu.Lock()
	defer ps.bmu.Unlock()
	return ps.ballots.Contribution(replica), nil
}

// Correct sets this replica's correction of lost's counters for the poll:
// with a target (Contribution), per option, the target minus what lost's
// own counters say; with none, zero. It reports whether the correction
// changed (the next delta carries it).
func (w Stewards) Correct(pollID, lost string, target map[string]int64) (bool, error) {
	s := w.s
	ps, err := s.poll(pollID)
	if err != nil {
		return false, err
	}
	active := target != nil
	id := StewardID(lost, s.replica)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	changed := false
	for option := range ps.local.options {
		c := ps.tally.Counter(option)
		p, n := c.P.Get(id), c.N.Get(id)
		if !active && p == n {
			continue
		}
		want := int64(0)
		if active {
			want = target[option] - (int64(c.P.Get(lost)) - int64(c.N.Get(lost)))
		}
		switch cur := int64(p) - int64(n); {
		case want > cur:
			p += uint64(want - cur)
		case want < cur:
			n += uint64(cur - want)
		default:
			continue
		}
		ps.tally.MergeEntry(id, option, p, n)
		changed = true
	}
	if changed {
		// The correction is against lost's counters as this node holds
		// them: they go out in the same delta, so no node adds the one
		// without the other.
		ps.sendOn(lost)
	}
	return changed, nil
}

// Corrected returns the gone replicas whose counters this replica
// corrects now (a correction not zero) in the poll.
func (w Stewards) Corrected(pollID string) []string {
	s := w.s
	ps, err := s.poll(pollID)
	if err != nil {
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	suffix := stewardSep + s.replica
	var out []string
	for _, r := range ps.tally.Replicas() {
		if !stewardedBy(r, s.replica) {
			continue
		}
		lost := strings.TrimSuffix(r, suffix)
		for option := range ps.local.options {
			if c := ps.tally.Counter(option); c.P.Get(r) != c.N.Get(r) {
				out = append(out, lost)
				break
			}
		}
	}
	return out
}

// Republish queues replica's ballots of the poll after Seq after (up to
// max) for this node's next delta, as if they were its own: ballots a
// gone replica took that reached this node only as its buddy's copies
// (its own delta never went out). It returns the last Seq queued (after
// when none).
func (w Stewards) Republish(pollID, replica string, after uint64, max int) (uint64, error) {
	s := w.s
	ps, err := s.poll(pollID)
	if err != nil {
		return after, err
	}
	ps.bmu.Lock()
	bs := ps.ballots.Since(replica, after, min(max, maxOutbox-len(ps.outbox)))
	ps.outbox = append(ps.outbox, bs...)
	ps.bmu.Unlock()
	if len(bs) == 0 {
		return after, nil
	}
	last := bs[len(bs)-1].Seq
	// Its record count is at least that: a fact any node may state (the
	// count merges by max). It goes out with the ballots, so a steward
	// knows there are more of its votes than it announced itself.
	ps.mu.Lock()
	ps.tally.MergeRecords(replica, last)
	ps.sendOn(replica)
	ps.mu.Unlock()
	return last, nil
}

// Held records that this node, as replica's buddy, holds its records of
// the poll through Seq seq (their copies, fsynced before replica
// acknowledged them): replica's record count is at least seq, and this
// node's deltas say so from now on. So a replica lost before its own
// delta went out is known to have taken votes, and certification reads
// them from the copy instead of leaving them out.
func (w Stewards) Held(pollID, replica string, seq uint64) error {
	ps, err := w.s.poll(pollID)
	if err != nil {
		return err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.held == nil {
		ps.held = map[string]bool{}
	}
	if !ps.held[replica] {
		ps.held[replica] = true
		ps.tally.Touch(replica) // its count so far goes out too
	}
	ps.tally.MergeRecords(replica, seq)
	return nil
}

// sendOn makes the next delta carry replica's entries, and every delta
// after it those that change; with ps.mu held.
func (ps *pollState) sendOn(replica string) {
	if ps.echo == nil {
		ps.echo = map[string]bool{}
	}
	ps.echo[replica] = true
	ps.tally.Touch(replica)
}
