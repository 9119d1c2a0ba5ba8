package state

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"tally/crdt"
	"tally/internal/wire"
)

// A checkpoint is this replica's in-memory vote state at one instant:
// per poll, how many of its records are applied, its exact (P, N) per
// option and its record count, and the poll's ballots — this replica's
// and those learned from the others, the cluster-wide voter state. A
// restart loads it and replays only the ledger records after it; ballots
// of other replicas taken since arrive by gossip. Idempotency keys are not
// kept: polls restored from a checkpoint check every key in the ledger
// index (correct, a little slower for those polls).

var (
	// ErrCheckpoint is returned for a checkpoint that cannot be used.
	ErrCheckpoint = errors.New("state: bad checkpoint")
	// ErrLedgerBehind is returned when a sound checkpoint counted more of
	// this replica's records than the ledger now holds: records that were
	// acknowledged are gone, and the node must not serve (it would reuse
	// their sequence numbers).
	ErrLedgerBehind = errors.New("state: the ledger holds fewer records than were acknowledged")
)

// checkpointMagic names the format; a checkpoint of another format is not
// used (the node replays the whole ledger instead).
const checkpointMagic = "TALLY-CHECKPOINT-2\n"

// pollSnapshot is one poll's state in a checkpoint.
type pollSnapshot struct {
	poll    string
	applied uint64               // records of this replica applied (its chain head)
	counts  map[string][2]uint64 // option → (P, N)
	records uint64
	ballots []crdt.Ballot
}

// Heads returns how many records of the poll this replica's chain holds.
type Heads func(poll string) (uint64, error)

// Checkpoint is a copy of the vote state, taken by Snapshot, to be
// written with Write.
type Checkpoint struct {
	polls []pollSnapshot
}

// Write writes the checkpoint to w and reports how many polls and ballots
// it holds.
func (c Checkpoint) Write(w io.Writer) (polls, ballots int, err error) {
	snaps := c.polls
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 256<<10)
	bw.WriteString(checkpointMagic)
	buf := binary.AppendUvarint(nil, uint64(len(snaps)))
	for _, s := range snaps {
		options := slices.Sorted(maps.Keys(s.counts))
		optIndex := make(map[string]uint64, len(options))
		buf = wire.AppendString(buf, s.poll)
		buf = binary.AppendUvarint(buf, s.applied)
		buf = binary.AppendUvarint(buf, s.records)
		buf = binary.AppendUvarint(buf, uint64(len(options)))
		for i, o := range options {
			optIndex[o] = uint64(i)
			buf = wire.AppendString(buf, o)
			buf = binary.AppendUvarint(buf, s.counts[o][0])
			buf = binary.AppendUvarint(buf, s.counts[o][1])
		}
		var replicas []string
		repIndex := map[string]uint64{}
		for _, b := range s.ballots {
			if _, ok := repIndex[b.Replica]; !ok {
				repIndex[b.Replica] = uint64(len(replicas))
				replicas = append(replicas, b.Replica)
			}
		}
		buf = binary.AppendUvarint(buf, uint64(len(replicas)))
		for _, r := range replicas {
			buf = wire.AppendString(buf, r)
		}
		buf = binary.AppendUvarint(buf, uint64(len(s.ballots)))
		for _, b := range s.ballots {
			oi, ok := optIndex[b.Option]
			if !ok {
				return 0, 0, fmt.Errorf("state: checkpoint: poll %q: a ballot for option %q, which the poll lacks", s.poll, b.Option)
			}
			buf = binary.AppendUvarint(buf, repIndex[b.Replica])
			buf = binary.AppendUvarint(buf, b.Seq)
			buf = binary.AppendVarint(buf, b.Wall)
			buf = binary.AppendUvarint(buf, uint64(b.Logical))
			buf = binary.BigEndian.AppendUint64(buf, b.Voter)
			buf = binary.BigEndian.AppendUint64(buf, b.Idem)
			buf = binary.AppendUvarint(buf, oi)
			buf = append(buf, boolByte(b.Eligible))
			if len(buf) > 128<<10 {
				bw.Write(buf)
				buf = buf[:0]
			}
			ballots++
		}
	}
	bw.Write(buf)
	if err := bw.Flush(); err != nil {
		return 0, 0, fmt.Errorf("state: write checkpoint: %w", err)
	}
	if _, err := w.Write(h.Sum(nil)); err != nil {
		return 0, 0, fmt.Errorf("state: write checkpoint: %w", err)
	}
	return len(snaps), ballots, nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// Snapshot copies the vote state, with each poll's chain head from heads.
// The caller holds back votes while it runs so that none is between its
// ledger append and its count (package ingest does): then every record up
// to each poll's head is in the copy and none after it.
func (s *State) Snapshot(heads Heads) (Checkpoint, error) {
	var out []pollSnapshot
	for _, d := range s.Defs.Polls() {
		ballots, counts, err := s.SnapshotBallots(d.ID)
		if err != nil {
			return Checkpoint{}, err
		}
		_, records, err := s.OwnCounts(d.ID)
		if err != nil {
			return Checkpoint{}, err
		}
		applied, err := heads(d.ID)
		if err != nil {
			return Checkpoint{}, err
		}
		out = append(out, pollSnapshot{poll: d.ID, applied: applied, counts: counts, records: records, ballots: ballots})
	}
	slices.SortFunc(out, func(a, b pollSnapshot) int { return strings.Compare(a.poll, b.poll) })
	return Checkpoint{polls: out}, nil
}

// LoadCheckpoint restores the vote state a checkpoint holds into a State
// that has counted nothing yet, and returns, per poll, how many of this
// replica's records it covers (replay the rest). A checkpoint that is
// damaged, names a poll the state does not know, or covers more records
// than the ledger holds is refused with ErrCheckpoint and nothing is
// restored.
// It is long because the whole checkpoint is checked before any of it is
// applied, in one pass over its polls.
func (s *State) LoadCheckpoint(r io.Reader, heads Heads) (map[string]uint64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	if len(b) < len(checkpointMagic)+sha256.Size || string(b[:len(checkpointMagic)]) != checkpointMagic {
		return nil, fmt.Errorf("%w: not a checkpoint of this version", ErrCheckpoint)
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if got := sha256.Sum256(body); string(got[:]) != string(sum) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCheckpoint)
	}
	d := wire.NewReader(body[len(checkpointMagic):], ErrCheckpoint)
	count := func() int { return int(d.Count(uint64(d.Len()), "count")) } // never more than the bytes left
	str := func() string { return d.String(uint64(d.Len()), "string") }
	snaps := make([]pollSnapshot, count())
	for i := range snaps {
		ps := &snaps[i]
		ps.poll, ps.applied, ps.records = str(), d.Uvarint(), d.Uvarint()
		options := make([]string, count())
		ps.counts = make(map[string][2]uint64, len(options))
		for j := range options {
			options[j] = str()
			ps.counts[options[j]] = [2]uint64{d.Uvarint(), d.Uvarint()}
		}
		def, ok := s.Defs.Poll(ps.poll)
		if !ok && d.Err() == nil && !s.Defs.Forgotten(ps.poll) {
			d.Fail("poll %q has no definition", ps.poll)
		}
		for j, o := range options {
			if id, ok := def.OptionID(o); ok {
				options[j] = id // one shared string per option
			}
		}
		replicas := make([]string, count())
		for j := range replicas {
			replicas[j] = str()
		}
		n := count()
		ps.ballots = make([]crdt.Ballot, 0, n)
		for range n {
			ri, seq, wall, logical := d.Uvarint(), d.Uvarint(), d.Varint(), d.Uvarint()
			voter, idem := d.Uint64(), d.Uint64()
			oi, eligible := d.Uvarint(), d.Byte()
			if d.Err() != nil {
				break
			}
			if ri >= uint64(len(replicas)) || oi >= uint64(len(options)) || logical > 1<<32-1 || eligible > 1 {
				d.Fail("ballot out of range")
				break
			}
			ps.ballots = append(ps.ballots, crdt.Ballot{Replica: replicas[ri], Seq: seq, Wall: wall, Logical: uint32(logical),
				Voter: voter, Idem: idem, Option: options[oi], Eligible: eligible == 1})
		}
		if d.Err() != nil {
			return nil, d.Err()
		}
	}
	if d.Len() != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrCheckpoint, d.Len())
	}
	for _, ps := range snaps {
		head, err := heads(ps.poll)
		if err != nil {
			return nil, err
		}
		if ps.applied > head {
			return nil, fmt.Errorf("%w: poll %q: the checkpoint counted %d records of this replica, the ledger holds %d", ErrLedgerBehind, ps.poll, ps.applied, head)
		}
	}
	// Checked whole: apply.
	applied := make(map[string]uint64, len(snaps))
	for _, ps := range snaps {
		if s.Defs.Forgotten(ps.poll) {
			applied[ps.poll] = ps.applied // left memory since this checkpoint: nothing to restore
			continue
		}
		for option, pn := range ps.counts {
			if err := errors.Join(s.Count(ps.poll, option, int64(pn[0])), s.Count(ps.poll, option, -int64(pn[1]))); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
			}
		}
		if err := s.AddRecords(ps.poll, ps.records); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
		}
		if err := s.RestoreBallots(ps.poll, ps.ballots); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
		}
		applied[ps.poll] = ps.applied
	}
	return applied, nil
}
