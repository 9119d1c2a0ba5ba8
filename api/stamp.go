package api

import (
	"strconv"
	"strings"
)

// MaxStampLen bounds a vote's "after" stamp: a wall time in milliseconds
// and a 32-bit logical counter, in decimal.
const MaxStampLen = 30

// ParseStamp reads a stamp as vote answers carry it, "wall.logical" in
// decimal (hlc.Timestamp's form without the replica).
func ParseStamp(s string) (wall int64, logical uint32, ok bool) {
	if len(s) > MaxStampLen {
		return 0, 0, false
	}
	w, l, found := strings.Cut(s, ".")
	if !found || !digits(w) || !digits(l) {
		return 0, 0, false
	}
	wall, err := strconv.ParseInt(w, 10, 64)
	if err != nil || wall <= 0 {
		return 0, 0, false
	}
	lg, err := strconv.ParseUint(l, 10, 32)
	if err != nil {
		return 0, 0, false
	}
	return wall, uint32(lg), true
}

// FormatStamp writes a stamp as ParseStamp reads it.
func FormatStamp(wall int64, logical uint32) string {
	return strconv.FormatInt(wall, 10) + "." + strconv.FormatUint(uint64(logical), 10)
}

// LaterStamp returns the later of two stamps: what a client keeps to send
// as its next vote's After. A stamp that does not parse loses.
func LaterStamp(a, b string) string {
	aw, al, aok := ParseStamp(a)
	bw, bl, bok := ParseStamp(b)
	switch {
	case !bok:
		if aok {
			return a
		}
		return ""
	case !aok:
		return b
	case bw > aw || bw == aw && bl > al:
		return b
	}
	return a
}

// digits reports whether s is 1 to 20 ASCII digits.
func digits(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
