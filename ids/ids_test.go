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
