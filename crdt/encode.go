package crdt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"tally/internal/wire"
)

// ErrMalformed is returned by the decoders for input they cannot accept.
var ErrMalformed = errors.New("crdt: malformed encoding")

// Limits the decoder enforces, so hostile input cannot make it allocate
// without bound.
const (
	MaxIDLen    = 64    // bytes in a replica or option id: ids.MaxLen (crdt imports only hlc)
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
		buf = wire.AppendString(buf, r)
	}
	options := t.Options()
	buf = binary.AppendUvarint(buf, uint64(len(options)))
	for _, option := range options {
		c := t.options[option]
		rs := unionKeys(c.P.m, c.N.m)
		buf = wire.AppendString(buf, option)
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
	if len(b) < len(tallyMagic) || string(b[:len(tallyMagic)]) != tallyMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrMalformed)
	}
	d := wire.NewReader(b[len(tallyMagic):], ErrMalformed)
	nrep := d.Count(MaxReplicas, "replicas")
	replicas := make([]string, 0, nrep)
	for range nrep {
		replicas = append(replicas, id(d, "replica"))
	}
	replica := func() string {
		i := d.Uvarint()
		if d.Err() == nil && i >= uint64(len(replicas)) {
			d.Fail("replica index %d out of range", i)
		}
		if d.Err() != nil {
			return ""
		}
		return replicas[i]
	}
	t := NewTally()
	nopt := d.Count(MaxOptions, "options")
	for range nopt {
		option := id(d, "option")
		n := d.Count(uint64(len(replicas)), "entries")
		for range n {
			r, p, neg := replica(), d.Uvarint(), d.Uvarint()
			if d.Err() != nil {
				return nil, d.Err()
			}
			t.MergeEntry(r, option, p, neg)
		}
	}
	nrec := d.Count(uint64(len(replicas)), "record counts")
	for range nrec {
		r, n := replica(), d.Uvarint()
		if d.Err() != nil {
			return nil, d.Err()
		}
		t.MergeRecords(r, n)
	}
	if d.Err() == nil && d.Len() != 0 {
		d.Fail("%d trailing bytes", d.Len())
	}
	if d.Err() != nil {
		return nil, d.Err()
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

// id reads a non-empty, valid UTF-8 id of at most MaxIDLen bytes.
func id(d *wire.Reader, what string) string {
	s := d.String(MaxIDLen, what)
	switch {
	case d.Err() != nil:
		return ""
	case s == "":
		d.Fail("empty %s", what)
	case !utf8.ValidString(s):
		d.Fail("%s is not UTF-8", what)
	default:
		return s
	}
	return ""
}
