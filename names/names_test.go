package names

import (
	"slices"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/secure/precis"
)

// Styled letters come out as the letters they style, spaces as one plain
// space between words; a name already in its form is left as it is.
func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"𝐟𝐮𝐜𝐤":              "fuck", // mathematical bold
		"ｆｕｃｋ":              "fuck", // fullwidth
		"ⓕⓤⓒⓚ":              "fuck", // circled
		"𝖋𝖚𝖈𝖐":              "fuck", // mathematical bold fraktur
		"ℌ𝔞𝔫𝔰":              "Hans",
		"ﬁona":              "fiona", // a ligature
		"ﾀﾛｳ":               "タロウ",   // half-width katakana
		"Zoe\u0308":         "Zoë",   // decomposed: composed
		"田中\u3000太郎":        "田中 太郎", // the ideographic space a Japanese keyboard types
		"  Ann \u00a0 Lee ": "Ann Lee",
		"x²":                "x2",
		"\u00a0":            "",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
	for _, same := range realNames {
		if got := Normalize(same); got != same {
			t.Errorf("Normalize(%q) = %q, want it unchanged", same, got)
		}
	}
}

// realNames are ordinary names of many scripts, in normal form, no two
// alike.
var realNames = []string{"Ann", "Anna", "Zoë", "Zoe", "José María", "Jose Maria", "Ian", "Ewan",
	"محمد", "محمود", "فاطمة", "שרה", "שירה", "דוד", "王小明", "王小朋", "李娜", "田中 太郎", "さくら", "김민준", "김민지",
	"Ελένη", "Νίκος", "Алёна", "Алена", "Дмитрий", "नमस्ते", "प्रिया", "Nguyễn Văn An", "Ngozi", "Søren", "Łukasz",
	"👩\u200d👩\u200d👧", "🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F", "R2-D2"}

// Names a viewer would take for one another share a key; ordinary names
// of every script stay apart.
func TestLookAlike(t *testing.T) {
	for _, pair := range [][2]string{
		{"Аnn", "Ann"}, // Cyrillic А
		{"аnn", "ann"}, // Cyrillic а
		{"Ιan", "Ian"}, // Greek Ι
		{"Ian", "lan"}, // capital I, small l
		{"ΑΝΝ", "ANN"}, // Greek capitals
		{"ANN", "Ann"}, // case
		{"ann", "Ann"},
		{"𝐀𝐧𝐧", "Ann"}, // mathematical bold
		{"Ａｎｎ", "Ann"}, // fullwidth
		{"Ⓐⓝⓝ", "Ann"}, // circled
		{"𝐟𝐮𝐜𝐤", "ｆｕｃｋ"},
		{"раураl", "paypal"}, // Cyrillic р, а, у and a Latin l
		{"Sam", "Sarn"},      // m and rn
		{"B0B", "BOB"},       // zero and O
		{"Ann  Lee", "Ann Lee"},
		{"Zoe\u0308", "Zoë"},
		{"Ann", "Ann"}, // itself
	} {
		if !LookAlike(pair[0], pair[1]) || !LookAlike(pair[1], pair[0]) {
			t.Errorf("%q and %q do not look alike: keys %q, %q", pair[0], pair[1], Keys(pair[0]), Keys(pair[1]))
		}
	}
	for i, a := range realNames {
		for _, b := range realNames[i+1:] {
			if LookAlike(a, b) {
				t.Errorf("%q and %q look alike: keys %q, %q", a, b, Keys(a), Keys(b))
			}
		}
	}
}

// A key is the same for a name and its normal form; one key when case
// folding changes nothing.
func TestKeys(t *testing.T) {
	if k := Keys("محمد"); len(k) != 1 {
		t.Errorf("keys of an uncased name: %q", k)
	}
	if k := Keys("Ann"); !slices.Equal(k, []string{"Ann", "ann"}) {
		t.Errorf("keys of Ann: %q", k)
	}
	if !slices.Equal(Keys("𝐀𝐧𝐧"), Keys("Ann")) {
		t.Errorf("keys of a styled name: %q", Keys("𝐀𝐧𝐧"))
	}
	if Skeleton("Аnn") != "Ann" {
		t.Errorf("skeleton %q", Skeleton("Аnn"))
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range append(slices.Clone(realNames), "𝐟𝐮𝐜𝐤", "ｆｕｃｋ", "ⓕⓤⓒⓚ", "  a  b ", "a\u00b4", "\u00b4\u00b4", "Аnn", "\xff", "e\u0301\u0302") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1<<10 {
			return // a name is at most a few hundred bytes; the profile's own code is quadratic on long runs of marks
		}
		n := Normalize(s)
		if again := Normalize(n); again != n {
			t.Fatalf("Normalize(%q) = %q, then %q: not stable", s, n, again)
		}
		if utf8.ValidString(s) != utf8.ValidString(n) {
			t.Fatalf("Normalize(%q) = %q changed whether it is UTF-8", s, n)
		}
		if !slices.Equal(Keys(s), Keys(n)) || !LookAlike(s, n) {
			t.Fatalf("%q and its normal form %q have other keys", s, n)
		}
		// The Nickname profile's mapping, wherever the profile takes the name.
		if want, err := precis.Nickname.String(s); err == nil && utf8.ValidString(s) && want != n {
			t.Fatalf("Normalize(%q) = %q, the Nickname profile %q", s, n, want)
		}
	})
}
