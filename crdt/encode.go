package crdt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"
)

// ErrMalformed is returned by the decoders for input they cannot accept.
var ErrMalformed = errors.New("crdt: malformed encoding")

// Limits the decoder enforces, so hostile input cannot make it allocate
// without bound.
const (
	MaxIDLen    = 128   // bytes in a replica or option id
	MaxReplicas = 4096  // replicas in one encoded tally
	MaxOptions  = 256   // options in one encoded tally
	tallyMagic  = "TY1" // format tag and version
)

// MarshalBinary encodes the tally's entries (not its local version) in a
// compact form: a replica table, then per option the (replica, p, n)
// entries, then the record counts, all as varints.
func (t *Tally) MarshalBinary() ([]byte, error) {
	replicas := t.replicaTable()
	index := make(map[string]uint64, len(replicas))
	buf := append(make([]byte, 0, 64+16*len(t.changed)), tallyMagic...)
	buf = binary.AppendUvarint(buf, uint64(len(replicas)))
	for i, r := range replicas {
		index[r] = uint64(i)
		buf = appendString(buf, r)
	}
	options := t.Options()
	buf = binary.AppendUvarint(buf, uint64(len(options)))
	for _, option := range options {
		c := t.options[option]
		rs := unionKeys(c.P.m, c.N.m)
		buf = appendString(buf, option)
		buf = binary.AppendUvarint(buf, uint64(len(rs)))
		for _, r := range rs {
			buf = binary.AppendUvarint(buf, index[r])
			buf = binary.AppendUvarint(buf, c.P.m[r])
			buf = binary.AppendUvarint(buf, c.N.m[r])
		}
	}
	rs := t.records.Replicas()
	buf = binary.AppendUvarint(buf, uint64(len(rs)))
	for _, r := range rs {
		buf = binary.AppendUvarint(buf, index[r])
		buf = binary.AppendUvarint(buf, t.records.m[r])
	}
	return buf, nil
}

// DecodeTally decodes a tally written by MarshalBinary. Every entry of the
// result counts as changed, so the decoded tally can be merged or
// forwarded as a delta. Malformed, truncated or oversized input, and
// trailing bytes, are rejected with ErrMalformed.
func DecodeTally(b []byte) (*Tally, error) {
	d := decoder{b: b}
	if len(b) < len(tallyMagic) || string(b[:len(tallyMagic)]) != tallyMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrMalformed)
	}
	d.b = d.b[len(tallyMagic):]
	nrep := d.count(MaxReplicas, "replicas")
	replicas := make([]string, 0, nrep)
	for range nrep {
		replicas = append(replicas, d.id("replica"))
	}
	replica := func() string {
		i := d.uvarint()
		if d.err == nil && i >= uint64(len(replicas)) {
			d.fail("replica index %d out of range", i)
		}
		if d.err != nil {
			return ""
		}
		return replicas[i]
	}
	t := NewTally()
	nopt := d.count(MaxOptions, "options")
	for range nopt {
		option := d.id("option")
		n := d.count(uint64(len(replicas)), "entries")
		for range n {
			r, p, neg := replica(), d.uvarint(), d.uvarint()
			if d.err != nil {
				return nil, d.err
			}
			t.MergeEntry(r, option, p, neg)
		}
	}
	nrec := d.count(uint64(len(replicas)), "record counts")
	for range nrec {
		r, n := replica(), d.uvarint()
		if d.err != nil {
			return nil, d.err
		}
		t.MergeRecords(r, n)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return t, nil
}

func (t *Tally) replicaTable() []string {
	set := make(map[string]struct{})
	for _, c := range t.options {
		for r := range c.P.m {
			set[r] = struct{}{}
		}
		for r := range c.N.m {
			set[r] = struct{}{}
		}
	}
	for r := range t.records.m {
		set[r] = struct{}{}
	}
	return slices.Sorted(maps.Keys(set))
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// decoder reads varints and strings, remembering the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a varint that must not exceed limit.
func (d *decoder) count(limit uint64, what string) uint64 {
	v := d.uvarint()
	if d.err == nil && v > limit {
		d.fail("%s %d over limit %d", what, v, limit)
		return 0
	}
	return v
}

// id reads a non-empty, valid UTF-8 string of at most MaxIDLen bytes.
func (d *decoder) id(what string) string {
	n := d.count(MaxIDLen, what+" length")
	if d.err != nil {
		return ""
	}
	if n == 0 || uint64(len(d.b)) < n {
		d.fail("bad %s length %d", what, n)
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	if !utf8.ValidString(s) {
		d.fail("%s is not UTF-8", what)
		return ""
	}
	return s
}
