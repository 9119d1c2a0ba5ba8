package api

import "testing"

func TestStamps(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wall    int64
		logical uint32
		ok      bool
	}{
		{"1764770000123.4", 1764770000123, 4, true},
		{"1.0", 1, 0, true},
		{"1.4294967295", 1, 4294967295, true},
		{"1.4294967296", 0, 0, false}, // the logical counter is 32 bits
		{"0.0", 0, 0, false},
		{"", 0, 0, false},
		{".", 0, 0, false},
		{"12", 0, 0, false},
		{"-1.0", 0, 0, false},
		{"+1.0", 0, 0, false},
		{"1.0@eu-1", 0, 0, false},
		{"1e3.0", 0, 0, false},
		{"NaN", 0, 0, false},
		{"9223372036854775808.0", 0, 0, false}, // overflows int64
		{"１.0", 0, 0, false},                   // a full-width digit
	} {
		w, l, ok := ParseStamp(tc.in)
		if w != tc.wall || l != tc.logical || ok != tc.ok {
			t.Errorf("ParseStamp(%q) = %d, %d, %v; want %d, %d, %v", tc.in, w, l, ok, tc.wall, tc.logical, tc.ok)
		}
	}
	for _, tc := range []struct{ a, b, want string }{
		{"", "", ""},
		{"5.1", "", "5.1"},
		{"", "5.1", "5.1"},
		{"5.1", "5.2", "5.2"},
		{"5.9", "6.0", "6.0"},
		{"6.0", "5.9", "6.0"},
		{"10.0", "9.99", "10.0"}, // numbers, not strings
		{"junk", "5.1", "5.1"},
		{"5.1", "junk", "5.1"},
	} {
		if got := LaterStamp(tc.a, tc.b); got != tc.want {
			t.Errorf("LaterStamp(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}

func FuzzParseStamp(f *testing.F) {
	for _, s := range []string{"1764770000123.4", "1.0", "", "x.y", "1.4294967296"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, l, ok := ParseStamp(s)
		if !ok {
			return
		}
		if w <= 0 {
			t.Fatalf("%q: wall %d accepted", s, w)
		}
		back := FormatStamp(w, l)
		if w2, l2, ok2 := ParseStamp(back); !ok2 || w2 != w || l2 != l {
			t.Fatalf("%q → %q does not read back", s, back)
		}
	})
}
