package ingest

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
	ErrCheckpoint = errors.New("ingest: bad checkpoint")
	// ErrLedgerBehind is returned when a sound checkpoint counted more of
	// this replica's records than the ledger now holds: records that were
	// acknowledged are gone, and the node must not serve (it would reuse
	// their sequence numbers).
	ErrLedgerBehind = errors.New("ingest: the ledger holds fewer records than were acknowledged")
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

// WriteCheckpoint snapshots the vote state and writes it to w. Votes are
// held back only while the state is copied, not while it is written: the
// copy is taken with no vote between its ledger append and its count, so
// every record up to each poll's chain head is in the snapshot and none
// after it.
func (p *Pipeline) WriteCheckpoint(w io.Writer, heads Heads) (polls, ballots int, err error) {
	p.inflight.Lock()
	snaps, err := p.snapshot(heads)
	p.inflight.Unlock()
	if err != nil {
		return 0, 0, err
	}
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
				return 0, 0, fmt.Errorf("ingest: checkpoint: poll %q: a ballot for option %q, which the poll lacks", s.poll, b.Option)
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
		return 0, 0, fmt.Errorf("ingest: write checkpoint: %w", err)
	}
	if _, err := w.Write(h.Sum(nil)); err != nil {
		return 0, 0, fmt.Errorf("ingest: write checkpoint: %w", err)
	}
	return len(snaps), ballots, nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// snapshot copies the state. Callers hold p.inflight exclusively.
func (p *Pipeline) snapshot(heads Heads) ([]pollSnapshot, error) {
	var out []pollSnapshot
	for _, d := range p.cfg.State.Polls() {
		ballots, counts, err := p.cfg.State.SnapshotBallots(d.ID)
		if err != nil {
			return nil, err
		}
		_, records, err := p.cfg.State.OwnCounts(d.ID)
		if err != nil {
			return nil, err
		}
		applied, err := heads(d.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, pollSnapshot{poll: d.ID, applied: applied, counts: counts, records: records, ballots: ballots})
	}
	slices.SortFunc(out, func(a, b pollSnapshot) int { return strings.Compare(a.poll, b.poll) })
	return out, nil
}

// LoadCheckpoint restores the state a checkpoint holds into a pipeline that
// has counted nothing yet, and returns, per poll, how many of this
// replica's records it covers (replay the rest). A checkpoint that is
// damaged, names a poll the state does not know, or covers more records
// than the ledger holds is refused with ErrCheckpoint and nothing is
// restored.
func (p *Pipeline) LoadCheckpoint(r io.Reader, heads Heads) (map[string]uint64, error) {
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
		s := &snaps[i]
		s.poll, s.applied, s.records = str(), d.Uvarint(), d.Uvarint()
		options := make([]string, count())
		s.counts = make(map[string][2]uint64, len(options))
		for j := range options {
			options[j] = str()
			s.counts[options[j]] = [2]uint64{d.Uvarint(), d.Uvarint()}
		}
		def, ok := p.cfg.State.Poll(s.poll)
		if !ok && d.Err() == nil && !p.cfg.State.Forgotten(s.poll) {
			d.Fail("poll %q has no definition", s.poll)
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
		s.ballots = make([]crdt.Ballot, 0, n)
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
			s.ballots = append(s.ballots, crdt.Ballot{Replica: replicas[ri], Seq: seq, Wall: wall, Logical: uint32(logical),
				Voter: voter, Idem: idem, Option: options[oi], Eligible: eligible == 1})
		}
		if d.Err() != nil {
			return nil, d.Err()
		}
	}
	if d.Len() != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrCheckpoint, d.Len())
	}
	for _, s := range snaps {
		head, err := heads(s.poll)
		if err != nil {
			return nil, err
		}
		if s.applied > head {
			return nil, fmt.Errorf("%w: poll %q: the checkpoint counted %d records of this replica, the ledger holds %d", ErrLedgerBehind, s.poll, s.applied, head)
		}
	}
	// Checked whole: apply.
	applied := make(map[string]uint64, len(snaps))
	for _, s := range snaps {
		if p.cfg.State.Forgotten(s.poll) {
			applied[s.poll] = s.applied // left memory since this checkpoint: nothing to restore
			continue
		}
		for option, pn := range s.counts {
			if err := errors.Join(p.cfg.State.Count(s.poll, option, int64(pn[0])), p.cfg.State.Count(s.poll, option, -int64(pn[1]))); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
			}
		}
		if err := p.cfg.State.AddRecords(s.poll, s.records); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
		}
		if err := p.cfg.State.RestoreBallots(s.poll, s.ballots); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
		}
		applied[s.poll] = s.applied
	}
	return applied, nil
}
