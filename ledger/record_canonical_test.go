package ledger

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"
)

// Only the canonical encoding decodes: a varint in a longer form than
// needed is refused, so the hash of a record's bytes is the record's hash
// (ReadStream relies on it to skip hashing each record twice).
func TestDecodeRecordIsCanonical(t *testing.T) {
	r := Record{Poll: "p", Replica: "eu-1", Seq: 1, Wall: 1796083200000, Voter: "v", Option: "a", Idem: "k", Trust: 1, Counted: true, IPHash: "00"}
	b := r.AppendBinary(nil)
	if _, err := DecodeRecord(b); err != nil {
		t.Fatal(err)
	}
	// The poll's length, 1, as two bytes (0x81 0x00) instead of one.
	long := append([]byte{b[0], 0x81, 0x00}, b[2:]...)
	if _, err := DecodeRecord(long); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a non-minimal varint decoded: %v", err)
	}
	// Through a stream with a hash that matches its (non-canonical) bytes:
	// refused, not taken with a hash the chain would not know.
	var s bytes.Buffer
	s.WriteString(streamMagic)
	s.WriteByte(byte(len(long)))
	s.Write(long)
	sum := sha256.Sum256(long)
	s.Write(sum[:])
	for _, err := range ReadStream(&s) {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("stream with a non-canonical record: %v", err)
		}
	}
	// A record read from a stream carries the hash of its bytes, which is
	// the hash of the record.
	var ok bytes.Buffer
	if _, err := WriteStream(&ok, func(yield func(Record, error) bool) { yield(r, nil) }); err != nil {
		t.Fatal(err)
	}
	for got, err := range ReadStream(&ok) {
		if err != nil {
			t.Fatal(err)
		}
		if !got.summed || got.Hash() != r.Hash() {
			t.Fatalf("summed %v, hash %v, want %v", got.summed, got.Hash(), r.Hash())
		}
	}
}
