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

// DisplayText checks text that others are shown (a quiz participant's
// name, a poll's question and labels, a quiz's title): Text, and no
// Unicode format characters (category Cf), among them every bidi control
// (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C), which can make
// a name read as another on a leaderboard. Kept: the zero-width joiner
// and non-joiner (emoji sequences, Persian and Indic scripts) and the tag
// characters of subdivision flags.
func DisplayText(s string, max int) error {
	if err := Text(s, max); err != nil {
		return err
	}
	for _, c := range s {
		if unicode.Is(unicode.Cf, c) && c != '\u200c' && c != '\u200d' && !(c >= 0xE0020 && c <= 0xE007F) {
			return fmt.Errorf("contains the invisible format character U+%04X", c)
		}
	}
	return nil
}
