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
	maxSigned    = 1024   // a signed head's binary form (ledger.SignedHead.AppendBinary) is ~200 bytes
	requestMagic = "TCC2" // TCC1, before copies carried their signed heads, is refused
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

// request is one copy request: from's records, and from's signed head
// of each of their chains, at the chain's last record in the request.
type request struct {
	From  string
	Recs  []ledger.Record
	Heads []ledger.SignedHead
}

// appendRequest encodes a copy request: the sender's replica, its
// records, then its signed heads.
func appendRequest(b []byte, req request) []byte {
	b = append(b, requestMagic...)
	b = wire.AppendString(b, req.From)
	b = binary.AppendUvarint(b, uint64(len(req.Recs)))
	var enc []byte
	for i := range req.Recs {
		enc = req.Recs[i].AppendBinary(enc[:0])
		b = wire.AppendBytes(b, enc)
	}
	b = binary.AppendUvarint(b, uint64(len(req.Heads)))
	for i := range req.Heads {
		enc = req.Heads[i].AppendBinary(enc[:0])
		b = wire.AppendBytes(b, enc)
	}
	return b
}

// decodeRequest decodes a copy request: every record must be the
// sender's, and it must carry one signed head of the sender's per chain
// of its records, of the chain's last record there (its seq and hash).
// Whose key signed the heads, and whether they verify, the buddy's store
// checks (Store.take).
func decodeRequest(b []byte) (request, error) {
	if len(b) < len(requestMagic) || string(b[:len(requestMagic)]) != requestMagic {
		return request{}, fmt.Errorf("%w: not a copy request", ErrMalformed)
	}
	var req request
	r := wire.NewReader(b[len(requestMagic):], ErrMalformed)
	req.From = r.String(ids.MaxLen, "replica")
	n := r.Count(MaxRecords, "records")
	if r.Err() == nil {
		if err := ids.Valid(req.From); err != nil {
			return request{}, fmt.Errorf("%w: replica: %w", ErrMalformed, err)
		}
	}
	last := map[string]int{} // poll → index of its last record in the request
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		rec, err := ledger.DecodeRecord(r.LenBytes(maxRecord, "record"))
		if r.Err() != nil {
			break
		}
		if err != nil {
			return request{}, fmt.Errorf("%w: record %d: %w", ErrMalformed, i, err)
		}
		if rec.Replica != req.From {
			return request{}, fmt.Errorf("%w: record %d is %s's, not %s's", ErrMalformed, i, rec.Replica, req.From)
		}
		req.Recs = append(req.Recs, rec)
		if j, ok := last[rec.Poll]; !ok || rec.Seq > req.Recs[j].Seq {
			last[rec.Poll] = len(req.Recs) - 1
		}
	}
	nh := r.Count(uint64(len(last)), "signed heads")
	for i := uint64(0); i < nh && r.Err() == nil; i++ {
		h, err := ledger.DecodeSignedHead(r.LenBytes(maxSigned, "signed head"))
		if r.Err() != nil {
			break
		}
		if err != nil {
			return request{}, fmt.Errorf("%w: signed head %d: %w", ErrMalformed, i, err)
		}
		j, ok := last[h.Poll]
		switch {
		case h.Replica != req.From:
			return request{}, fmt.Errorf("%w: signed head %d is of %s's chain, not %s's", ErrMalformed, i, h.Replica, req.From)
		case !ok:
			return request{}, fmt.Errorf("%w: signed head %d is of poll %s, of no record here (or a second one)", ErrMalformed, i, h.Poll)
		case h.Seq != req.Recs[j].Seq || h.Hash != req.Recs[j].Hash():
			return request{}, fmt.Errorf("%w: signed head %d (%s seq %d) is not the head of the chain's last record here (seq %d)", ErrMalformed, i, h.Poll, h.Seq, req.Recs[j].Seq)
		}
		delete(last, h.Poll)
		req.Heads = append(req.Heads, h)
	}
	if r.Err() == nil && len(last) > 0 {
		return request{}, fmt.Errorf("%w: %d chains of the records without a signed head", ErrMalformed, len(last))
	}
	if r.Err() == nil && r.Len() != 0 {
		return request{}, fmt.Errorf("%w: %d bytes after the signed heads", ErrMalformed, r.Len())
	}
	if r.Err() != nil {
		return request{}, r.Err()
	}
	return req, nil
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
