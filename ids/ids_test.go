package ids

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, ok := range []string{"a", "eu-1", "p.2_x", strings.Repeat("z", MaxLen)} {
		if err := Valid(ok); err != nil {
			t.Errorf("Valid(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "a/b", "a\x00", "é", strings.Repeat("z", MaxLen+1)} {
		if Valid(bad) == nil {
			t.Errorf("Valid(%q) accepted", bad)
		}
	}
}

func TestText(t *testing.T) {
	for _, ok := range []string{"x", "voter ✓", "日本"} {
		if err := Text(ok, 16); err != nil {
			t.Errorf("Text(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "\xff", "a\x07", "a\nb", strings.Repeat("x", 17)} {
		if Text(bad, 16) == nil {
			t.Errorf("Text(%q) accepted", bad)
		}
	}
}

// DisplayText refuses the invisible characters that spoof a name on a
// leaderboard (issue 25), and keeps what real names and emoji need.
func TestDisplayText(t *testing.T) {
	for _, ok := range []string{"Ann", "מרים", "عليّ", "👨\u200d👩\u200d👧", "می\u200cخواهم", "🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F", "❤\ufe0f"} {
		if err := DisplayText(ok, 64); err != nil {
			t.Errorf("DisplayText(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"\u202eevil", "a\u202ab", "x\u2066y\u2069", "\u200fAnn", "\u200eAnn", "\u061cA", "A\u200bnn", "\ufeffAnn", "An\u00adn", "a\x07"} {
		if DisplayText(bad, 64) == nil {
			t.Errorf("DisplayText(%q) accepted", bad)
		}
	}
}
