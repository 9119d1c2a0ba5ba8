package gossip

import (
	"encoding/binary"
	"math"

	"tally/crdt"
	"tally/ids"
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
		b = appendString(b, r)
	}
	b = binary.AppendUvarint(b, uint64(len(optList)))
	for _, o := range optList {
		b = appendString(b, o)
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
func decodeBallots(d *reader, raw []byte) []crdt.Ballot {
	r := reader{b: raw}
	repList := make([]string, r.count(maxBallotNames, "replicas"))
	for i := range repList {
		repList[i] = r.id("ballot replica")
	}
	optList := make([]string, r.count(maxBallotNames, "options"))
	for i := range optList {
		optList[i] = string(r.bytes(ids.MaxLen, "ballot option"))
	}
	n := r.count(MaxBallots, "ballots")
	if r.err == nil && uint64(n) > uint64(len(r.b))/minBallot {
		r.fail("%d ballots in %d bytes", n, len(r.b))
	}
	out := make([]crdt.Ballot, 0, n)
	prev := int64(0)
	for i := 0; i < n && r.err == nil; i++ {
		ri, oi, seq := r.uvarint(), r.uvarint(), r.uvarint()
		dw, logical := r.varint(), r.uvarint()
		voter, idem, eligible := r.u64(), r.u64(), r.byte()
		if r.err != nil {
			break
		}
		wall := prev + dw
		if ri >= uint64(len(repList)) || oi >= uint64(len(optList)) || seq == 0 || logical > math.MaxUint32 || eligible > 1 ||
			(dw > 0 && wall < prev) || (dw < 0 && wall > prev) || wall <= 0 {
			r.fail("ballot %d out of range", i)
			break
		}
		prev = wall
		out = append(out, crdt.Ballot{Replica: repList[ri], Option: optList[oi], Seq: seq, Wall: wall, Logical: uint32(logical),
			Voter: voter, Idem: idem, Eligible: eligible == 1})
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes after ballots", len(r.b))
	}
	if r.err != nil {
		d.fail("ballots: %v", r.err)
		return nil
	}
	return out
}

// maxBallotNames bounds the replica and option tables of one update.
const maxBallotNames = 1024

func (d *reader) count(limit int, what string) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(limit) {
		d.fail("%d %s", n, what)
		return 0
	}
	return int(n)
}

func (d *reader) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *reader) u64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *reader) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}
