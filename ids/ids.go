package ids

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxLen is the longest id.
const MaxLen = 64

// Valid checks an id: 1–64 bytes of [A-Za-z0-9._-].
func Valid(s string) error {
	if len(s) == 0 || len(s) > MaxLen {
		return fmt.Errorf("must be 1-%d characters, got %d", MaxLen, len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%q may hold only letters, digits, '.', '_' and '-'", s)
		}
	}
	return nil
}

// Text checks client-chosen text: 1–max bytes of valid UTF-8 without
// control characters.
func Text(s string, max int) error {
	if len(s) == 0 || len(s) > max {
		return fmt.Errorf("must be 1-%d bytes, got %d", max, len(s))
	}
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	for _, c := range s {
		if unicode.IsControl(c) {
			return errors.New("contains a control character")
		}
	}
	return nil
}
