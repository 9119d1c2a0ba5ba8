package crdt

import (
	"slices"
)

// Ballot is one ledger record's effect on voter state, as every replica
// learns it: who voted (a keyed hash of the voter id), for what, when (the
// record's HLC stamp and its place in its replica's chain), under which
// idempotency key (hashed too), and whether it may count at all (counted
// at ingest: neither late nor shadowed).
type Ballot struct {
	Replica  string
	Seq      uint64 // 1, 2, 3, … per (poll, replica): the record's place in its chain
	Wall     int64
	Logical  uint32
	Voter    uint64
	Idem     uint64
	Option   string
	Eligible bool
}

// Ballots is a poll's grow-only set of ballots from every replica and the
// vote that counts for each voter, by certification's rules:
//   - of the ballots sharing an idempotency key the earliest stands, the
//     others are duplicates;
//   - ballots not eligible, or stamped at or after the poll's close, never
//     count;
//   - of each voter's remaining ballots the latest counts (the earliest
//     for a quiz question: NewFirstBallots).
//
// The result depends only on the set, never on the order ballots arrive
// in or how often: it is a CRDT (a G-Set read through a deterministic
// function). Every change of a voter's counted ballot is reported, so a
// replica can move its own counters. Not safe for concurrent use.
type Ballots struct {
	closesAt  int64 // ballots stamped at or after it are late; 0: none
	firstWins bool  // a quiz question: each voter's earliest ballot counts

	replicas []string
	repIndex map[string]uint16
	chains   []chain  // per replica
	have     []uint64 // per replica: every Seq up to it is held
	options  []string
	optIndex map[string]uint16

	voters map[uint64]voterState
	idems  map[uint64]ref // the earliest ballot of each key
	n      int
	latest int64 // the newest wall time of any ballot held (LatestWall)
}

// ref names a held ballot: its replica's index and its Seq.
type ref struct {
	rep uint16
	seq uint32 // Seq; 0: none
}

func (r ref) none() bool { return r.seq == 0 }

// entry is a held ballot: 40 bytes.
type entry struct {
	wall    int64
	voter   uint64
	idem    uint64
	logical uint32
	nextSeq uint32 // the voter's previous ballot (0: none) …
	nextRep uint16 // … of this replica
	option  uint16
	flags   uint8
}

const (
	present  = 1 << iota
	eligible // counted at ingest
	dup      // a ballot under the same key is earlier
)

func (e *entry) is(f uint8) bool { return e.flags&f != 0 }

func (e *entry) next() ref { return ref{rep: e.nextRep, seq: e.nextSeq} }

// chunkBits sizes the chunks a replica's ballots are held in: 4,096
// entries (160 KiB), allocated as Seqs reach them, so a chain never holds
// more than one chunk of room it does not use, and a Seq far ahead costs a
// pointer per chunk skipped, not the entries.
const chunkBits = 12

// chain is one replica's ballots, by Seq.
type chain struct {
	chunks []*[1 << chunkBits]entry
}

// get returns the entry of index i (Seq-1), or nil when its chunk is not
// allocated.
func (c *chain) get(i uint64) *entry {
	k := i >> chunkBits
	if k >= uint64(len(c.chunks)) || c.chunks[k] == nil {
		return nil
	}
	return &c.chunks[k][i&(1<<chunkBits-1)]
}

// slot returns the entry of index i, allocating its chunk.
func (c *chain) slot(i uint64) *entry {
	k := i >> chunkBits
	for uint64(len(c.chunks)) <= k {
		c.chunks = append(c.chunks, nil)
	}
	if c.chunks[k] == nil {
		c.chunks[k] = new([1 << chunkBits]entry)
	}
	return &c.chunks[k][i&(1<<chunkBits-1)]
}

type voterState struct {
	head   ref // the voter's ballots, newest added first
	winner ref // the ballot that counts; none
}

// Change is a voter's counted ballot moving: From or To empty when the
// voter counted nothing before or counts nothing after.
type Change struct {
	FromReplica, FromOption string
	ToReplica, ToOption     string
}

// NewBallots returns an empty set for a poll that closes at closesAt (Unix
// ms; 0: not known yet).
func NewBallots(closesAt int64) *Ballots {
	return &Ballots{closesAt: closesAt, repIndex: map[string]uint16{}, optIndex: map[string]uint16{},
		voters: map[uint64]voterState{}, idems: map[uint64]ref{}}
}

// NewFirstBallots returns an empty set in which each voter's earliest
// counted ballot counts, as a quiz question's first answer does
// (ledger.ReconcileConfig.FirstWins).
func NewFirstBallots(closesAt int64) *Ballots {
	s := NewBallots(closesAt)
	s.firstWins = true
	return s
}

// Answered reports whether the voter has any ballot in the set, from any
// replica, counted or not: a quiz participant who has answered.
func (s *Ballots) Answered(voter uint64) bool {
	_, ok := s.voters[voter]
	return ok
}

// maxSeq bounds a ballot's Seq: refs hold 32 bits.
const maxSeq = 1<<32 - 1

// maxReplicas bounds the replicas of one set: refs hold 16 bits.
const maxReplicas = 1<<16 - 1

// Add puts b in the set and calls changed for every voter whose counted
// ballot moved. It reports false, changing nothing, for a ballot already
// held (a redelivery) or one it cannot hold (Seq 0 or past 2^32-1, too
// many replicas or options).
func (s *Ballots) Add(b Ballot, changed func(Change)) bool {
	if b.Seq == 0 || b.Seq > maxSeq {
		return false
	}
	rep, ok := s.repIndex[b.Replica]
	if !ok {
		if len(s.replicas) >= maxReplicas {
			return false
		}
		rep = uint16(len(s.replicas))
		s.repIndex[b.Replica] = rep
		s.replicas = append(s.replicas, b.Replica)
		s.chains = append(s.chains, chain{})
		s.have = append(s.have, 0)
	}
	opt, ok := s.optIndex[b.Option]
	if !ok {
		if len(s.options) >= 1<<16-1 {
			return false
		}
		opt = uint16(len(s.options))
		s.optIndex[b.Option] = opt
		s.options = append(s.options, b.Option)
	}
	c := &s.chains[rep]
	i := b.Seq - 1
	if e := c.get(i); e != nil && e.is(present) {
		return false
	}
	me := ref{rep: rep, seq: uint32(b.Seq)}
	v := s.voters[b.Voter]
	flags := uint8(present)
	if b.Eligible {
		flags |= eligible
	}
	*c.slot(i) = entry{wall: b.Wall, voter: b.Voter, idem: b.Idem, logical: b.Logical, nextSeq: v.head.seq, nextRep: v.head.rep, option: opt, flags: flags}
	for {
		e := c.get(s.have[rep])
		if e == nil || !e.is(present) {
			break
		}
		s.have[rep]++
	}
	v.head = me
	s.voters[b.Voter] = v
	s.n++
	s.latest = max(s.latest, b.Wall)

	var demoted ref // the key's previous first ballot, now a duplicate
	if first, ok := s.idems[b.Idem]; !ok {
		s.idems[b.Idem] = me
	} else if s.after(first, me) {
		s.idems[b.Idem], demoted = me, first
		s.at(first).flags |= dup
	} else {
		s.at(me).flags |= dup
	}
	s.settle(b.Voter, changed)
	if !demoted.none() {
		if ov := s.at(demoted).voter; ov != b.Voter {
			s.settle(ov, changed)
		}
	}
	return true
}

// SetClosesAt applies the poll's close (a close moved by the host):
// ballots stamped at or after it stop counting, or count again when it
// moves later.
func (s *Ballots) SetClosesAt(closesAt int64, changed func(Change)) {
	if closesAt == s.closesAt {
		return
	}
	s.closesAt = closesAt
	for voter := range s.voters {
		s.settle(voter, changed)
	}
}

func (s *Ballots) at(r ref) *entry { return s.chains[r.rep].get(uint64(r.seq) - 1) }

// after reports whether a orders after b: ledger.Record.After's order
// (HLC wall, logical counter, replica, Seq) on held entries.
func (s *Ballots) after(a, b ref) bool {
	ea, eb := s.at(a), s.at(b)
	if ea.wall != eb.wall {
		return ea.wall > eb.wall
	}
	if ea.logical != eb.logical {
		return ea.logical > eb.logical
	}
	if a.rep != b.rep {
		return s.replicas[a.rep] > s.replicas[b.rep]
	}
	return a.seq > b.seq
}

// counts reports whether the held ballot r may be a voter's counted one.
func (s *Ballots) counts(r ref) bool {
	e := s.at(r)
	return e.is(eligible) && !e.is(dup) && (s.closesAt == 0 || e.wall < s.closesAt)
}

// settle recomputes the voter's counted ballot and reports a move.
func (s *Ballots) settle(voter uint64, changed func(Change)) {
	v := s.voters[voter]
	best := ref{}
	for r := v.head; !r.none(); r = s.at(r).next() {
		if s.counts(r) && (best.none() || s.after(r, best) != s.firstWins) {
			best = r
		}
	}
	if best == v.winner {
		return
	}
	var c Change
	if !v.winner.none() {
		c.FromReplica, c.FromOption = s.replicas[v.winner.rep], s.options[s.at(v.winner).option]
	}
	if !best.none() {
		c.ToReplica, c.ToOption = s.replicas[best.rep], s.options[s.at(best).option]
	}
	v.winner = best
	s.voters[voter] = v
	if changed != nil && (c.FromReplica != c.ToReplica || c.FromOption != c.ToOption) {
		changed(c)
	}
}

// Totals returns option → voters whose counted ballot picks it.
func (s *Ballots) Totals() map[string]int64 {
	out := map[string]int64{}
	for _, v := range s.voters {
		if !v.winner.none() {
			out[s.options[s.at(v.winner).option]]++
		}
	}
	return out
}

// Len returns how many ballots are held.
func (s *Ballots) Len() int { return s.n }

// Voters returns how many distinct voters the held ballots name.
func (s *Ballots) Voters() int { return len(s.voters) }

// Have returns the highest Seq of replica up to which every ballot is held.
func (s *Ballots) Have(replica string) uint64 {
	if rep, ok := s.repIndex[replica]; ok {
		return s.have[rep]
	}
	return 0
}

// Replicas returns the replicas the set holds ballots of, sorted.
func (s *Ballots) Replicas() []string { return slices.Sorted(slices.Values(s.replicas)) }

// Since returns up to max of replica's ballots after Seq after, in order,
// stopping at the first one not held.
func (s *Ballots) Since(replica string, after uint64, max int) []Ballot {
	rep, ok := s.repIndex[replica]
	if !ok {
		return nil
	}
	var out []Ballot
	c := &s.chains[rep]
	for i := after; len(out) < max; i++ {
		e := c.get(i)
		if e == nil || !e.is(present) {
			break
		}
		out = append(out, s.ballot(rep, i, e))
	}
	return out
}

// Idem returns the earliest ballot under the idempotency key when it is
// the same voter's (a retry of that vote): the ballot that counts for the
// key, wherever it was taken, as certification keeps it.
func (s *Ballots) Idem(idem, voter uint64) (Ballot, bool) {
	r, found := s.idems[idem]
	if !found || s.at(r).voter != voter {
		return Ballot{}, false
	}
	return s.ballot(r.rep, uint64(r.seq)-1, s.at(r)), true
}

// IdemVoter returns the voter of the earliest ballot under the
// idempotency key: the voter the key belongs to.
func (s *Ballots) IdemVoter(idem uint64) (voter uint64, ok bool) {
	r, found := s.idems[idem]
	if !found {
		return 0, false
	}
	return s.at(r).voter, true
}

// LastWall returns the HLC wall time of the voter's counted ballot.
func (s *Ballots) LastWall(voter uint64) (int64, bool) {
	v, ok := s.voters[voter]
	if !ok || v.winner.none() {
		return 0, false
	}
	return s.at(v.winner).wall, true
}

// Latest returns the HLC stamp of the voter's latest ballot, counted or
// not: a new vote of theirs is stamped after it.
func (s *Ballots) Latest(voter uint64) (wall int64, logical uint32, ok bool) {
	v, found := s.voters[voter]
	if !found {
		return 0, 0, false
	}
	for r := v.head; !r.none(); {
		e := s.at(r)
		if !ok || e.wall > wall || e.wall == wall && e.logical > logical {
			wall, logical, ok = e.wall, e.logical, true
		}
		r = e.next()
	}
	return wall, logical, ok
}

// LatestWall returns the newest HLC wall time of any ballot held, from
// any replica: a close "now" comes after it.
func (s *Ballots) LatestWall() int64 { return s.latest }

// ballot rebuilds the held ballot at index i of replica rep.
func (s *Ballots) ballot(rep uint16, i uint64, e *entry) Ballot {
	return Ballot{Replica: s.replicas[rep], Seq: i + 1, Wall: e.wall, Logical: e.logical, Voter: e.voter, Idem: e.idem,
		Option: s.options[e.option], Eligible: e.is(eligible)}
}

// Bytes estimates the memory the set holds: the ballots' chunks (40 bytes
// an entry) and the two maps (about 48 bytes per voter and 32 per key, Go's
// maps included).
func (s *Ballots) Bytes() int {
	n := 0
	for _, c := range s.chains {
		for _, ch := range c.chunks {
			if ch != nil {
				n += len(ch) * 40
			}
		}
		n += 8 * len(c.chunks)
	}
	return n + len(s.voters)*48 + len(s.idems)*32
}

// All returns every held ballot, by replica (in the order first seen)
// then Seq.
func (s *Ballots) All() []Ballot {
	out := make([]Ballot, 0, s.n)
	for rep := range s.chains {
		for k, ch := range s.chains[rep].chunks {
			if ch == nil {
				continue // a hole: a Seq far ahead allocates only its own chunk
			}
			for j := range ch {
				if e := &ch[j]; e.is(present) {
					out = append(out, s.ballot(uint16(rep), uint64(k)<<chunkBits+uint64(j), e))
				}
			}
		}
	}
	return out
}

// Contribution returns, by option, how many voters' counted ballots
// replica took: what that replica's own counters must show.
func (s *Ballots) Contribution(replica string) map[string]int64 {
	out := map[string]int64{}
	rep, ok := s.repIndex[replica]
	if !ok {
		return out
	}
	for _, v := range s.voters {
		if !v.winner.none() && v.winner.rep == rep {
			out[s.options[s.at(v.winner).option]]++
		}
	}
	return out
}

// ReplicaCount returns how many replicas the set holds ballots of.
func (s *Ballots) ReplicaCount() int { return len(s.replicas) }

// Holds reports whether the set holds ballots of replica.
func (s *Ballots) Holds(replica string) bool {
	_, ok := s.repIndex[replica]
	return ok
}
