package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

var errFormat = errors.New("format: malformed")

func TestRoundTrip(t *testing.T) {
	var b []byte
	b = binary.AppendUvarint(b, 0)
	b = binary.AppendUvarint(b, math.MaxUint64)
	b = binary.AppendVarint(b, math.MinInt64)
	b = binary.AppendVarint(b, -1)
	b = AppendString(b, "")
	b = AppendString(b, "héllo")
	b = AppendBytes(b, []byte{0, 1, 2})
	b = append(b, 7)
	b = binary.BigEndian.AppendUint64(b, 1<<60+5)
	for _, r := range []*Reader{NewReader(b, errFormat), NewCanonicalReader(b, errFormat)} {
		if v := r.Uvarint(); v != 0 {
			t.Fatal(v)
		}
		if v := r.Uvarint(); v != math.MaxUint64 {
			t.Fatal(v)
		}
		if v := r.Varint(); v != math.MinInt64 {
			t.Fatal(v)
		}
		if v := r.Varint(); v != -1 {
			t.Fatal(v)
		}
		if s := r.String(10, "s"); s != "" {
			t.Fatal(s)
		}
		if s := r.String(10, "s"); s != "héllo" {
			t.Fatal(s)
		}
		if v := r.LenBytes(3, "b"); !bytes.Equal(v, []byte{0, 1, 2}) {
			t.Fatal(v)
		}
		if v := r.Byte(); v != 7 {
			t.Fatal(v)
		}
		if v := r.Uint64(); v != 1<<60+5 {
			t.Fatal(v)
		}
		if r.Err() != nil || r.Len() != 0 {
			t.Fatal(r.Err(), r.Len())
		}
	}
}

func TestErrorsStickAndWrapTheSentinel(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		read func(*Reader)
		want string
	}{
		{"empty varint", nil, func(r *Reader) { r.Uvarint() }, "bad varint"},
		{"unterminated varint", []byte{0x80, 0x80}, func(r *Reader) { r.Uvarint() }, "bad varint"},
		{"varint over 64 bits", bytes.Repeat([]byte{0xff}, 11), func(r *Reader) { r.Uvarint() }, "bad varint"},
		{"truncated bytes", []byte{1, 2}, func(r *Reader) { r.Bytes(3) }, "truncated"},
		{"negative length", []byte{1}, func(r *Reader) { r.Bytes(-1) }, "truncated"},
		{"truncated uint64", []byte{1, 2, 3}, func(r *Reader) { r.Uint64() }, "truncated"},
		{"count over limit", []byte{11}, func(r *Reader) { r.Count(10, "options") }, "options 11 over limit 10"},
		{"string over limit", AppendString(nil, "abcdef"), func(r *Reader) { r.String(5, "name") }, "name of 6 bytes"},
		{"string past the end", []byte{5, 'a'}, func(r *Reader) { r.String(100, "name") }, "name of 5 bytes"},
		{"huge length", binary.AppendUvarint(nil, math.MaxUint64), func(r *Reader) { r.LenBytes(math.MaxUint64, "blob") }, "blob of"},
	}
	for _, c := range cases {
		r := NewReader(c.in, errFormat)
		c.read(r)
		if !errors.Is(r.Err(), errFormat) || !strings.Contains(r.Err().Error(), c.want) {
			t.Errorf("%s: %v, want %q wrapping the sentinel", c.name, r.Err(), c.want)
		}
		first := r.Err()
		// After an error: zero values, the first error stands.
		if r.Uvarint() != 0 || r.Varint() != 0 || r.Byte() != 0 || r.Uint64() != 0 || r.String(10, "x") != "" || len(r.Bytes(4)) != 4 {
			t.Errorf("%s: reads after an error return values", c.name)
		}
		if r.Err() != first {
			t.Errorf("%s: error replaced: %v", c.name, r.Err())
		}
	}
	if r := NewReader(nil, nil); r.Uvarint() == 0 && !errors.Is(r.Err(), ErrMalformed) {
		t.Fatalf("no sentinel given: %v", r.Err())
	}
}

func TestCanonicalRefusesNonMinimalVarints(t *testing.T) {
	for _, in := range [][]byte{{0x80, 0x00}, {0x81, 0x80, 0x00}, {0xff, 0x00}} {
		if v := NewReader(in, errFormat).Uvarint(); v != uint64(in[0]&0x7f) {
			t.Fatalf("lenient reader of %x: %d", in, v)
		}
		r := NewCanonicalReader(in, errFormat)
		r.Uvarint()
		if r.Err() == nil || !strings.Contains(r.Err().Error(), "non-minimal varint") {
			t.Fatalf("canonical reader of %x: %v", in, r.Err())
		}
		r = NewCanonicalReader(in, errFormat)
		r.Varint()
		if r.Err() == nil {
			t.Fatalf("canonical signed reader of %x took it", in)
		}
	}
}

// FuzzReader: any input, any sequence of reads: no panic, no read past
// the input, and what a canonical reader takes re-encodes to the same
// bytes.
func FuzzReader(f *testing.F) {
	f.Add([]byte{}, []byte{0, 1, 2, 3})
	f.Add(AppendString(binary.AppendUvarint(nil, 300), "abc"), []byte{0, 4})
	f.Add([]byte{0x80, 0x00, 5}, []byte{0, 0, 1})
	f.Fuzz(func(t *testing.T, in, ops []byte) {
		r := NewCanonicalReader(in, errFormat)
		var out []byte
		for _, op := range ops {
			switch op % 6 {
			case 0:
				out = binary.AppendUvarint(out, r.Uvarint())
			case 1:
				out = binary.AppendVarint(out, r.Varint())
			case 2:
				out = append(out, r.Byte())
			case 3:
				out = binary.BigEndian.AppendUint64(out, r.Uint64())
			case 4:
				out = AppendBytes(out, r.LenBytes(1<<20, "blob"))
			case 5:
				out = append(out, r.Bytes(int(op)%9)...)
			}
			if r.Err() != nil {
				return
			}
		}
		if r.Len() > len(in) {
			t.Fatalf("%d left of %d", r.Len(), len(in))
		}
		if !bytes.Equal(out, in[:len(in)-r.Len()]) {
			t.Fatalf("canonical reads of %x re-encode to %x", in[:len(in)-r.Len()], out)
		}
	})
}
