package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrMalformed is what a Reader's errors wrap when its caller gave no
// sentinel of its own.
var ErrMalformed = errors.New("wire: malformed input")

// Reader reads an encoding from a byte slice, keeping the first error.
type Reader struct {
	b         []byte
	err       error
	base      error
	canonical bool
}

// NewReader reads b; its errors wrap base (ErrMalformed when nil).
func NewReader(b []byte, base error) *Reader {
	if base == nil {
		base = ErrMalformed
	}
	return &Reader{b: b, base: base}
}

// NewCanonicalReader is NewReader for a canonical encoding: it also
// refuses varints not in their shortest form, so one value has one
// encoding and a hash of the bytes is a hash of the value.
func NewCanonicalReader(b []byte, base error) *Reader {
	r := NewReader(b, base)
	r.canonical = true
	return r
}

// Err returns the first error, or nil.
func (r *Reader) Err() error { return r.err }

// Len returns how many bytes are left to read.
func (r *Reader) Len() int { return len(r.b) }

// Rest returns the bytes left to read (not copied).
func (r *Reader) Rest() []byte { return r.b }

// Fail records an error (the first one stands), wrapping the base sentinel.
func (r *Reader) Fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{r.base}, args...)...)
	}
}

var zeros [64]byte

// Bytes returns the next n bytes (not copied). After an error, or when
// fewer are left ("truncated"), it returns n zero bytes, so a caller may
// copy them into a fixed-size array without checking first.
func (r *Reader) Bytes(n int) []byte {
	if r.err == nil && (n < 0 || len(r.b) < n) {
		r.Fail("truncated")
	}
	if r.err != nil {
		if n <= 0 {
			return nil
		}
		if n <= len(zeros) {
			return zeros[:n]
		}
		return make([]byte, n) // n is bounded by the caller's limit
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

// Byte returns the next byte.
func (r *Reader) Byte() byte { return r.Bytes(1)[0] }

// Uint64 returns the next eight bytes as a big-endian integer.
func (r *Reader) Uint64() uint64 { return binary.BigEndian.Uint64(r.Bytes(8)) }

// Uvarint returns the next unsigned varint.
func (r *Reader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if !r.consume(n) {
		return 0
	}
	return v
}

// Varint returns the next signed (zig-zag) varint.
func (r *Reader) Varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if !r.consume(n) {
		return 0
	}
	return v
}

// consume takes a varint of n bytes as encoding/binary measured it (n <= 0:
// none could be read), refusing a non-minimal one in canonical mode.
func (r *Reader) consume(n int) bool {
	switch {
	case n <= 0:
		r.Fail("bad varint")
		return false
	case r.canonical && n > 1 && r.b[n-1] == 0:
		r.Fail("non-minimal varint")
		return false
	}
	r.b = r.b[n:]
	return true
}

// Count returns the next unsigned varint, which must not exceed limit
// ("<what> <n> over limit <limit>").
func (r *Reader) Count(limit uint64, what string) uint64 {
	v := r.Uvarint()
	if r.err == nil && v > limit {
		r.Fail("%s %d over limit %d", what, v, limit)
		return 0
	}
	return v
}

// LenBytes returns a length-prefixed byte string (not copied) of at most
// limit bytes ("<what> of <n> bytes" when longer, or longer than what is
// left).
func (r *Reader) LenBytes(limit uint64, what string) []byte {
	n := r.Uvarint()
	if r.err != nil {
		return nil
	}
	if n > limit || n > uint64(len(r.b)) {
		r.Fail("%s of %d bytes", what, n)
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

// String returns a length-prefixed string of at most limit bytes.
func (r *Reader) String(limit uint64, what string) string {
	return string(r.LenBytes(limit, what))
}

// AppendString appends s with its length as a varint prefix.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendBytes appends v with its length as a varint prefix.
func AppendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}
