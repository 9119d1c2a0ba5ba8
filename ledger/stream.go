package ledger

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
)

// The binary stream is how nodes hand each other a poll's records for
// certification: faster to write and read than NDJSON (the auditor's
// format), and checked the same way. After a magic line, each record is a
// uvarint length, the record's canonical encoding (the bytes its chain
// hashes) and its 32-byte hash, which the reader recomputes, so an altered
// last record is caught even though no later link points at it.
const streamMagic = "TALLY-RECORDS-1\n"

// StreamContentType is the HTTP content type of the binary stream.
const StreamContentType = "application/x-tally-records"

// A signed head (a replica's signature over its chain's last record, as
// in an NDJSON export) may follow the last record of its chain: a zero
// length (no record encodes to nothing), then the head's length and its
// binary form (SignedHead.AppendBinary). A buddy's copy carries its
// replica's head this way (docs/certification.md, "From a copy").

// WriteStream writes records in the binary stream format and returns how
// many it wrote.
func WriteStream(w io.Writer, records iter.Seq2[Record, error]) (int, error) {
	return WriteStreamHead(w, records, nil)
}

// WriteStreamHead is WriteStream followed by a signed head of the last
// chain written (none when head is nil).
func WriteStreamHead(w io.Writer, records iter.Seq2[Record, error], head *SignedHead) (int, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	if _, err := bw.WriteString(streamMagic); err != nil {
		return 0, err
	}
	n := 0
	var buf []byte
	for r, err := range records {
		if err != nil {
			return n, err
		}
		buf = r.AppendBinary(buf[:0])
		h := Hash(sha256.Sum256(buf))
		var lenBuf [binary.MaxVarintLen64]byte
		bw.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(buf)))])
		bw.Write(buf)
		if _, err := bw.Write(h[:]); err != nil {
			return n, fmt.Errorf("ledger: cannot write stream: %w", err)
		}
		n++
	}
	if head != nil {
		buf = head.AppendBinary(buf[:0])
		bw.WriteByte(0)
		bw.Write(binary.AppendUvarint(nil, uint64(len(buf))))
		bw.Write(buf)
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("ledger: cannot write stream: %w", err)
	}
	return n, nil
}

// ExportStream writes one poll's records in the binary stream format.
func (l *Ledger) ExportStream(w io.Writer, poll string) (int, error) {
	return WriteStream(w, l.Scan(poll))
}

// ExportStreamAfter writes replica's records of one poll with a seq above
// after in the binary stream format: the tail of a chain a peer already
// holds up to after (certification's prefetch).
func (l *Ledger) ExportStreamAfter(w io.Writer, poll, replica string, after uint64) (int, error) {
	return WriteStream(w, l.ScanAfter(poll, replica, after))
}

// IsStream reports whether br starts with the binary stream's magic.
func IsStream(br *bufio.Reader) bool {
	b, err := br.Peek(len(streamMagic))
	return err == nil && string(b) == streamMagic
}

// ReadStream yields the records of a binary stream, each decoded, validated
// and checked against its hash, all of one poll. Errors name the record.
// Signed heads are checked as ReadStreamHeads does.
func ReadStream(r io.Reader) iter.Seq2[Record, error] {
	return ReadStreamHeads(r, nil)
}

// ReadStreamHeads is ReadStream that also checks the stream's signed heads
// and passes each to onHead (nil: checked only), before the records after
// it: a head must verify with the key it carries and be the head of the
// record just before it (its poll, replica, seq and hash), once per
// chain; a record of its chain after it is an error. Whose key signed it
// is the caller's to judge.
func ReadStreamHeads(r io.Reader, onHead func(*SignedHead)) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		br, ok := r.(*bufio.Reader)
		if !ok {
			br = bufio.NewReaderSize(r, 64<<10)
		}
		magic := make([]byte, len(streamMagic))
		if _, err := io.ReadFull(br, magic); err != nil || !bytes.Equal(magic, []byte(streamMagic)) {
			yield(Record{}, fmt.Errorf("%w: not a record stream", ErrMalformed))
			return
		}
		var poll string
		var in interner
		var prev *Record               // the record before, for a signed head
		var signed map[string]struct{} // replicas whose signed head came
		buf := make([]byte, 0, 512)
		for n := 1; ; n++ {
			size, err := binary.ReadUvarint(br)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil || size > MaxLineBytes {
				yield(Record{}, fmt.Errorf("record %d: %w: bad length", n, ErrMalformed))
				return
			}
			if size == 0 {
				h, err := readStreamHead(br, prev, signed)
				if err != nil {
					yield(Record{}, fmt.Errorf("signed head after record %d: %w", n-1, err))
					return
				}
				if signed == nil {
					signed = map[string]struct{}{}
				}
				signed[h.Replica] = struct{}{}
				if onHead != nil {
					onHead(h)
				}
				n--
				continue
			}
			var rec Record
			rec, buf, err = readStreamRecord(br, buf, size)
			if errors.Is(err, io.ErrUnexpectedEOF) {
				yield(Record{}, fmt.Errorf("record %d: %w: truncated", n, ErrMalformed))
				return
			}
			if err == nil && poll != "" && rec.Poll != poll {
				err = fmt.Errorf("%w: record of poll %q in a stream of poll %q", ErrInvalid, rec.Poll, poll)
			}
			if _, after := signed[rec.Replica]; err == nil && after {
				err = fmt.Errorf("%w: a record of %s/%s after its signed head", ErrChain, rec.Poll, rec.Replica)
			}
			if err != nil {
				yield(Record{}, fmt.Errorf("record %d: %w", n, err))
				return
			}
			poll = rec.Poll
			rec.Poll, rec.Replica = in.get(rec.Poll), in.get(rec.Replica)
			if prev == nil {
				prev = new(Record)
			}
			*prev = rec
			if !yield(rec, nil) {
				return
			}
		}
	}
}

// readStreamRecord reads one record of size bytes and its stated hash
// into buf (grown as needed, and returned). The bytes are checked against
// the stated hash as they came. The decoder takes only the canonical
// encoding, so that hash is the record's: the chain check uses it instead
// of encoding and hashing the record again. A short read is
// io.ErrUnexpectedEOF.
func readStreamRecord(br *bufio.Reader, buf []byte, size uint64) (Record, []byte, error) {
	if cap(buf) < int(size)+len(Hash{}) {
		buf = make([]byte, 0, int(size)+len(Hash{}))
	}
	buf = buf[:int(size)+len(Hash{})]
	if _, err := io.ReadFull(br, buf); err != nil {
		return Record{}, buf, io.ErrUnexpectedEOF
	}
	rec, err := DecodeRecord(buf[:size])
	if err == nil {
		if sum := sha256.Sum256(buf[:size]); Hash(buf[size:]) != sum {
			err = fmt.Errorf("%w: hash does not match the record", ErrChain)
		} else {
			rec.sum, rec.summed = sum, true
		}
	}
	return rec, buf, err
}

// readStreamHead reads a signed head after its zero length and checks it:
// it verifies with the key it carries, it is the head of prev (the record
// before it: poll, replica, seq, hash), and its chain has no head yet.
func readStreamHead(br *bufio.Reader, prev *Record, signed map[string]struct{}) (*SignedHead, error) {
	size, err := binary.ReadUvarint(br)
	if err != nil || size > uint64(maxSignedHead) {
		return nil, fmt.Errorf("%w: bad length", ErrMalformed)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(br, b); err != nil {
		return nil, fmt.Errorf("%w: truncated", ErrMalformed)
	}
	h, err := DecodeSignedHead(b)
	switch {
	case err != nil:
		return nil, err
	case prev == nil || prev.Poll != h.Poll || prev.Replica != h.Replica || prev.Seq != h.Seq || prev.Hash() != h.Hash:
		return nil, fmt.Errorf("%w: the signed head of %s/%s (seq %d) is not the head of the record before it", ErrChain, h.Poll, h.Replica, h.Seq)
	case !h.Verify():
		return nil, fmt.Errorf("%w: the signed head of %s/%s does not verify", ErrChain, h.Poll, h.Replica)
	}
	if _, twice := signed[h.Replica]; twice {
		return nil, fmt.Errorf("%w: a second signed head of %s/%s", ErrChain, h.Poll, h.Replica)
	}
	return &h, nil
}
