package gossip

import (
	"encoding/binary"
	"math"

	"tally/crdt"
	"tally/ids"
	"tally/internal/wire"
)

// MaxBallots bounds the ballots of one poll in one message (a delta of
// 100 ms at 1,000,000 votes/s fits; a catch-up reply sends at most
// catchUpBatch).
const MaxBallots = 200_000

// minBallot is the smallest encoded ballot: five one-byte varints, two
// 8-byte hashes and the eligibility byte.
const minBallot = 5 + 16 + 1

// appendBallots writes a poll's ballots: a table of the replicas and the
// options they name, then per ballot the replica's and the option's
// index, Seq, HLC wall (as the difference from the ballot before, zigzag)
// and logical counter, the two hashes and whether it may count. A delta
// of one replica's ballots costs about 22 bytes a ballot before deflate.
func appendBallots(b []byte, bs []crdt.Ballot) []byte {
	reps, opts := map[string]uint64{}, map[string]uint64{}
	var repList, optList []string
	for _, x := range bs {
		if _, ok := reps[x.Replica]; !ok {
			reps[x.Replica] = uint64(len(repList))
			repList = append(repList, x.Replica)
		}
		if _, ok := opts[x.Option]; !ok {
			opts[x.Option] = uint64(len(optList))
			optList = append(optList, x.Option)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(repList)))
	for _, r := range repList {
		b = wire.AppendString(b, r)
	}
	b = binary.AppendUvarint(b, uint64(len(optList)))
	for _, o := range optList {
		b = wire.AppendString(b, o)
	}
	b = binary.AppendUvarint(b, uint64(len(bs)))
	prev := int64(0)
	for _, x := range bs {
		b = binary.AppendUvarint(b, reps[x.Replica])
		b = binary.AppendUvarint(b, opts[x.Option])
		b = binary.AppendUvarint(b, x.Seq)
		b = binary.AppendVarint(b, x.Wall-prev)
		prev = x.Wall
		b = binary.AppendUvarint(b, uint64(x.Logical))
		b = binary.BigEndian.AppendUint64(b, x.Voter)
		b = binary.BigEndian.AppendUint64(b, x.Idem)
		if x.Eligible {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	return b
}

// decodeBallots reads what appendBallots wrote; anything out of range
// fails the message.
func decodeBallots(d *wire.Reader, raw []byte) []crdt.Ballot {
	r := wire.NewReader(raw, ErrMalformed)
	repList := make([]string, readCount(r, maxBallotNames, "replicas"))
	for i := range repList {
		repList[i] = readID(r, "ballot replica")
	}
	optList := make([]string, readCount(r, maxBallotNames, "options"))
	for i := range optList {
		optList[i] = string(r.LenBytes(ids.MaxLen, "ballot option"))
	}
	n := readCount(r, MaxBallots, "ballots")
	if r.Err() == nil && uint64(n) > uint64(r.Len())/minBallot {
		r.Fail("%d ballots in %d bytes", n, r.Len())
	}
	out := make([]crdt.Ballot, 0, n)
	prev := int64(0)
	for i := 0; i < n && r.Err() == nil; i++ {
		ri, oi, seq := r.Uvarint(), r.Uvarint(), r.Uvarint()
		dw, logical := r.Varint(), r.Uvarint()
		voter, idem, eligible := r.Uint64(), r.Uint64(), r.Byte()
		if r.Err() != nil {
			break
		}
		wall := prev + dw
		if ri >= uint64(len(repList)) || oi >= uint64(len(optList)) || seq == 0 || logical > math.MaxUint32 || eligible > 1 ||
			(dw > 0 && wall < prev) || (dw < 0 && wall > prev) || wall <= 0 {
			r.Fail("ballot %d out of range", i)
			break
		}
		prev = wall
		out = append(out, crdt.Ballot{Replica: repList[ri], Option: optList[oi], Seq: seq, Wall: wall, Logical: uint32(logical),
			Voter: voter, Idem: idem, Eligible: eligible == 1})
	}
	if r.Err() == nil && r.Len() != 0 {
		r.Fail("%d trailing bytes after ballots", r.Len())
	}
	if r.Err() != nil {
		d.Fail("ballots: %v", r.Err())
		return nil
	}
	return out
}

// maxBallotNames bounds the replica and option tables of one update.
const maxBallotNames = 1024

// readCount reads a count that must not exceed limit.
func readCount(d *wire.Reader, limit int, what string) int {
	n := d.Uvarint()
	if d.Err() == nil && n > uint64(limit) {
		d.Fail("%d %s", n, what)
		return 0
	}
	return int(n)
}
