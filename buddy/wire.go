package buddy

import (
	"encoding/binary"
	"errors"
	"fmt"

	"tally/ids"
	"tally/internal/wire"
	"tally/ledger"
)

// ErrMalformed is what a copy message that cannot be decoded is refused
// with (wrapped with the reason).
var ErrMalformed = errors.New("buddy: malformed message")

// Bounds of a copy message: a ledger batch is sent in parts of at most
// MaxRecords records, each part one request.
const (
	MaxRecords   = 1024
	maxRecord    = 8 << 10 // one record's binary encoding
	maxHeads     = MaxRecords
	requestMagic = "TCC1"
	replyMagic   = "TCR1"
)

// The reply's status.
const (
	statusOK     byte = 0 // every record is in the buddy's store, fsynced
	statusBehind byte = 1 // the store's chains end before the records: heads follow
	statusRefuse byte = 2 // the records conflict with the store's, or are not the sender's: a reason follows
)

// head is where the buddy's copy of one of the sender's chains ends.
type head struct {
	Poll string
	Seq  uint64
}

// reply is the buddy's answer to one copy request.
type reply struct {
	Status byte
	Heads  []head // statusBehind: for every poll of the request
	Reason string // statusRefuse
}

// appendRequest encodes a copy request: from (the sender's replica) and
// its records.
func appendRequest(b []byte, from string, recs []ledger.Record) []byte {
	b = append(b, requestMagic...)
	b = wire.AppendString(b, from)
	b = binary.AppendUvarint(b, uint64(len(recs)))
	var enc []byte
	for i := range recs {
		enc = recs[i].AppendBinary(enc[:0])
		b = wire.AppendBytes(b, enc)
	}
	return b
}

// decodeRequest decodes a copy request; every record must be from's.
func decodeRequest(b []byte) (from string, recs []ledger.Record, err error) {
	if len(b) < len(requestMagic) || string(b[:len(requestMagic)]) != requestMagic {
		return "", nil, fmt.Errorf("%w: not a copy request", ErrMalformed)
	}
	r := wire.NewReader(b[len(requestMagic):], ErrMalformed)
	from = r.String(ids.MaxLen, "replica")
	n := r.Count(MaxRecords, "records")
	if r.Err() == nil {
		if err := ids.Valid(from); err != nil {
			return "", nil, fmt.Errorf("%w: replica: %w", ErrMalformed, err)
		}
	}
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		rec, err := ledger.DecodeRecord(r.LenBytes(maxRecord, "record"))
		if r.Err() != nil {
			break
		}
		if err != nil {
			return "", nil, fmt.Errorf("%w: record %d: %w", ErrMalformed, i, err)
		}
		if rec.Replica != from {
			return "", nil, fmt.Errorf("%w: record %d is %s's, not %s's", ErrMalformed, i, rec.Replica, from)
		}
		recs = append(recs, rec)
	}
	if r.Err() == nil && r.Len() != 0 {
		return "", nil, fmt.Errorf("%w: %d bytes after the records", ErrMalformed, r.Len())
	}
	if r.Err() != nil {
		return "", nil, r.Err()
	}
	return from, recs, nil
}

func appendReply(b []byte, rep reply) []byte {
	b = append(b, replyMagic...)
	b = append(b, rep.Status)
	switch rep.Status {
	case statusBehind:
		b = binary.AppendUvarint(b, uint64(len(rep.Heads)))
		for _, h := range rep.Heads {
			b = wire.AppendString(b, h.Poll)
			b = binary.AppendUvarint(b, h.Seq)
		}
	case statusRefuse:
		b = wire.AppendString(b, rep.Reason)
	}
	return b
}

func decodeReply(b []byte) (reply, error) {
	if len(b) < len(replyMagic)+1 || string(b[:len(replyMagic)]) != replyMagic {
		return reply{}, fmt.Errorf("%w: not a copy reply", ErrMalformed)
	}
	r := wire.NewReader(b[len(replyMagic):], ErrMalformed)
	rep := reply{Status: r.Byte()}
	switch rep.Status {
	case statusOK:
	case statusBehind:
		n := r.Count(maxHeads, "heads")
		for i := uint64(0); i < n && r.Err() == nil; i++ {
			rep.Heads = append(rep.Heads, head{Poll: r.String(ids.MaxLen, "poll"), Seq: r.Uvarint()})
		}
	case statusRefuse:
		rep.Reason = r.String(1024, "reason")
	default:
		r.Fail("status %d", rep.Status)
	}
	if r.Err() == nil && r.Len() != 0 {
		r.Fail("%d bytes after the reply", r.Len())
	}
	return rep, r.Err()
}
