package ledger

import (
	"encoding/binary"
	"fmt"
)

// Key layout. Poll and replica ids never contain 0x00 (ValidID), so they
// can be terminated by it; idempotency keys come last and need no
// terminator.
//
//	r <poll> 0 <replica> 0 <seq:8 big-endian>  → record (canonical encoding)
//	i <poll> 0 <idem>                          → vote id: <replica> 0 <seq:8>
//	h <poll> 0 <replica>                       → chain head: <seq:8> <hash:32>
//	s <poll> 0 <replica>                       → the replica's signed head of the chain (ImportSigned)
//	m <name>                                   → metadata owned by callers
const (
	prefixRecord = 'r'
	prefixIdem   = 'i'
	prefixHead   = 'h'
	prefixSigned = 's'
	prefixMeta   = 'm'
)

func recordKey(buf []byte, poll, replica string, seq uint64) []byte {
	buf = append(buf, prefixRecord)
	buf = append(buf, poll...)
	buf = append(buf, 0)
	buf = append(buf, replica...)
	buf = append(buf, 0)
	return binary.BigEndian.AppendUint64(buf, seq)
}

// pollRecordPrefix is the prefix of every record key of one poll.
func pollRecordPrefix(poll string) []byte {
	return append(append([]byte{prefixRecord}, poll...), 0)
}

func idemKey(buf []byte, poll, idem string) []byte {
	buf = append(buf, prefixIdem)
	buf = append(buf, poll...)
	buf = append(buf, 0)
	return append(buf, idem...)
}

func headKey(poll, replica string) []byte {
	k := append([]byte{prefixHead}, poll...)
	k = append(k, 0)
	return append(k, replica...)
}

func signedHeadKey(poll, replica string) []byte {
	k := append([]byte{prefixSigned}, poll...)
	k = append(k, 0)
	return append(k, replica...)
}

func encodeVoteID(buf []byte, id VoteID) []byte {
	buf = append(buf, id.Replica...)
	buf = append(buf, 0)
	return binary.BigEndian.AppendUint64(buf, id.Seq)
}

func decodeVoteID(b []byte) (VoteID, error) {
	if len(b) < 10 || b[len(b)-9] != 0 {
		return VoteID{}, fmt.Errorf("%w: stored vote id", ErrMalformed)
	}
	return VoteID{Replica: string(b[:len(b)-9]), Seq: binary.BigEndian.Uint64(b[len(b)-8:])}, nil
}

// head is the end of one (poll, replica) chain.
type head struct {
	seq  uint64
	hash Hash
}

func (h head) encode() []byte {
	return append(binary.BigEndian.AppendUint64(nil, h.seq), h.hash[:]...)
}

func decodeHead(b []byte) (head, error) {
	if len(b) != 8+len(Hash{}) {
		return head{}, fmt.Errorf("%w: stored chain head", ErrMalformed)
	}
	var h head
	h.seq = binary.BigEndian.Uint64(b)
	copy(h.hash[:], b[8:])
	return h, nil
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte{}, p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
