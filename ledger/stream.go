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

// WriteStream writes records in the binary stream format and returns how
// many it wrote.
func WriteStream(w io.Writer, records iter.Seq2[Record, error]) (int, error) {
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
func ReadStream(r io.Reader) iter.Seq2[Record, error] {
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
			if cap(buf) < int(size)+len(Hash{}) {
				buf = make([]byte, 0, int(size)+len(Hash{}))
			}
			buf = buf[:int(size)+len(Hash{})]
			if _, err := io.ReadFull(br, buf); err != nil {
				yield(Record{}, fmt.Errorf("record %d: %w: truncated", n, ErrMalformed))
				return
			}
			// The bytes are checked against the stated hash as they came. The
			// decoder takes only the canonical encoding, so that hash is the
			// record's: the chain check uses it instead of encoding and
			// hashing the record again.
			rec, err := DecodeRecord(buf[:size])
			if err == nil {
				if sum := sha256.Sum256(buf[:size]); Hash(buf[size:]) != sum {
					err = fmt.Errorf("%w: hash does not match the record", ErrChain)
				} else {
					rec.sum, rec.summed = sum, true
				}
			}
			if err == nil && poll != "" && rec.Poll != poll {
				err = fmt.Errorf("%w: record of poll %q in a stream of poll %q", ErrInvalid, rec.Poll, poll)
			}
			if err != nil {
				yield(Record{}, fmt.Errorf("record %d: %w", n, err))
				return
			}
			poll = rec.Poll
			rec.Poll, rec.Replica = in.get(rec.Poll), in.get(rec.Replica)
			if !yield(rec, nil) {
				return
			}
		}
	}
}
