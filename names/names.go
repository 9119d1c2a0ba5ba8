package names

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// rounds bounds how often Normalize applies its rules: NFKC can make
// spaces (U+00B4 ´ is a space and a combining acute), which the next
// round maps, as the Nickname profile repeats until the result is
// stable.
const rounds = 4

// Normalize returns name in the form it is stored, shown, vetted and
// compared in: Unicode spaces (category Zs) mapped to U+0020, none at
// either end, no two in a row, and NFKC — the PRECIS Nickname profile's
// mapping (RFC 8266 §2.2). It does not judge whether the result is a
// well-formed name; bytes that are not UTF-8 pass through unchanged.
// Normalize(Normalize(s)) == Normalize(s).
func Normalize(name string) string {
	for range rounds {
		next := norm.NFKC.String(mapSpaces(name))
		if next == name {
			break
		}
		name = next
	}
	return name
}

// mapSpaces is the Nickname profile's additional mapping rule: every
// space character is U+0020, none at either end, runs of them one.
func mapSpaces(s string) string {
	if !hasSpaceWork(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unicode.Is(unicode.Zs, r) {
			space = true
		} else {
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// hasSpaceWork reports whether mapSpaces would change s.
func hasSpaceWork(s string) bool {
	prevSpace := true // a space first is work
	for _, r := range s {
		switch {
		case r == ' ' && prevSpace, r != ' ' && unicode.Is(unicode.Zs, r):
			return true
		}
		prevSpace = r == ' '
	}
	return prevSpace && s != ""
}

// Keys returns the look-alike keys of a display name (normalised first):
// the UTS #39 skeleton of the name, and of the name case folded, one key
// when both are the same. Two names look alike when they share a key
// (LookAlike). A key is for comparing only, never for showing: it mixes
// scripts ("m" and "rn" share one).
func Keys(name string) []string {
	n := Normalize(name)
	asWritten := confusables.Skeleton(n)
	folded := confusables.Skeleton(cases.Fold().String(n)) // a Caser is not to be shared between goroutines
	if folded == asWritten {
		return []string{asWritten}
	}
	return []string{asWritten, folded}
}

// LookAlike reports whether two display names look alike: they share a
// key (Keys). A name looks like itself.
func LookAlike(a, b string) bool {
	kb := Keys(b)
	for _, k := range Keys(a) {
		for _, l := range kb {
			if k == l {
				return true
			}
		}
	}
	return false
}

// Skeleton returns the UTS #39 skeleton of a display name, normalised
// first, as written (the first of its Keys). A name filter that wants to
// catch its words spelt with other scripts' look-alike letters ("fսck"
// with an Armenian ս) compares the skeletons of the name and of its
// words.
func Skeleton(name string) string { return confusables.Skeleton(Normalize(name)) }
