package ids

import (
	"errors"
	"strings"
	"testing"
)

// joinVectors are fixed: clients/js/test/client.test.js checks the same
// ones (and a Python one-liner in docs/api.md reproduces them), so the
// page, a broadcaster's page and the node agree on every code.
var joinVectors = []struct{ kind, id, code string }{
	{JoinPoll, "demo", "FZHHXA"},
	{JoinEvent, "final", "K24VVN"},
	{JoinQuiz, "pub", "BYYGT4"},
	{JoinPoll, "ñandú-2026", "776KGQ"},
}

func TestJoinCodeVectors(t *testing.T) {
	for _, v := range joinVectors {
		if got := JoinCode(v.kind, v.id); got != v.code {
			t.Errorf("%s %q: %s, want %s", v.kind, v.id, got, v.code)
		}
	}
	if JoinCode(JoinPoll, "pub") == JoinCode(JoinQuiz, "pub") {
		t.Error("a poll and a quiz of one id share a code")
	}
}

func TestParseJoinCode(t *testing.T) {
	for in, want := range map[string]string{
		"FZHHXA": "FZHHXA", "fzhhxa": "FZHHXA", "#FZH-HXA": "FZHHXA", " fzh hxa ": "FZHHXA", "FZH.HXA": "FZHHXA",
	} {
		if got, err := ParseJoinCode(in); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "FZHHX", "FZHHXAA", "FZHHX0", "FZHHXO", "FZHHXI", "FZHHXU", "FZHHX\x00", "FZHHXÄ",
		strings.Repeat(" ", 40) + "FZHHXA", "ＦＺＨＨＸＡ"} {
		if got, err := ParseJoinCode(in); !errors.Is(err, ErrJoinCode) {
			t.Errorf("%q: %q %v, want ErrJoinCode", in, got, err)
		}
	}
}

// FuzzParseJoinCode: whatever is typed, a code comes out only as six
// characters of the alphabet, and a code parses to itself.
func FuzzParseJoinCode(f *testing.F) {
	for _, s := range []string{"FZHHXA", "#fzh-hxa", "", "0O1IL", "\xff\xfe", strings.Repeat("A", 33)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		code, err := ParseJoinCode(s)
		if err != nil {
			if !errors.Is(err, ErrJoinCode) {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if len(code) != JoinCodeLen || strings.Trim(code, JoinAlphabet) != "" {
			t.Fatalf("%q gave %q", s, code)
		}
		if again, err := ParseJoinCode(code); err != nil || again != code {
			t.Fatalf("%q does not parse to itself: %q %v", code, again, err)
		}
	})
}
