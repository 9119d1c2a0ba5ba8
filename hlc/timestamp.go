package hlc

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// Timestamp is one point in hybrid logical time. Wall is milliseconds since
// the Unix epoch, Logical orders events within one millisecond, and Replica
// breaks ties between replicas that stamped the same (Wall, Logical).
type Timestamp struct {
	Wall    int64  `json:"wall"`
	Logical uint32 `json:"logical"`
	Replica string `json:"replica,omitempty"`
}

// Compare orders timestamps by Wall, then Logical, then Replica. It returns
// -1, 0 or +1.
func (t Timestamp) Compare(o Timestamp) int {
	if c := cmp.Compare(t.Wall, o.Wall); c != 0 {
		return c
	}
	if c := cmp.Compare(t.Logical, o.Logical); c != 0 {
		return c
	}
	return strings.Compare(t.Replica, o.Replica)
}

// Less reports whether t orders before o.
func (t Timestamp) Less(o Timestamp) bool { return t.Compare(o) < 0 }

// IsZero reports whether t is the zero timestamp.
func (t Timestamp) IsZero() bool { return t.Wall == 0 && t.Logical == 0 && t.Replica == "" }

// String formats t as "wall.logical@replica", the form Parse reads back.
func (t Timestamp) String() string {
	s := strconv.FormatInt(t.Wall, 10) + "." + strconv.FormatUint(uint64(t.Logical), 10)
	if t.Replica != "" {
		s += "@" + t.Replica
	}
	return s
}

// Parse reads a timestamp in the form written by String.
func Parse(s string) (Timestamp, error) {
	var t Timestamp
	body, replica, _ := strings.Cut(s, "@")
	wall, logical, ok := strings.Cut(body, ".")
	if !ok {
		return t, fmt.Errorf("%w: %q has no logical part", ErrMalformed, s)
	}
	w, err := strconv.ParseInt(wall, 10, 64)
	if err != nil || w < 0 {
		return t, fmt.Errorf("%w: bad wall time in %q", ErrMalformed, s)
	}
	l, err := strconv.ParseUint(logical, 10, 32)
	if err != nil {
		return t, fmt.Errorf("%w: bad logical counter in %q", ErrMalformed, s)
	}
	return Timestamp{Wall: w, Logical: uint32(l), Replica: replica}, nil
}
