package ledger

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// A quiz answer's numbers are part of the record: they round-trip through
// the binary and the NDJSON encodings, they change its hash (so an export
// cannot alter a score unseen), and a record without them encodes exactly
// as before answers existed.
func TestAnswerRecords(t *testing.T) {
	r := vote("q1-1", "p1", "b", "k1", 5)
	r.Replica, r.Seq = "eu-1", 1
	// A record without an answer hashes as it did before answers existed
	// (the hash computed at the commit before them), so stored chains
	// still verify.
	old := r
	old.Signals = &Signals{SincePrevMs: 7, IPVotesPerMin: 3, IPVoters: 2, TokenAgeMs: -1, SocketAgeMs: 100, Datacenter: true}
	if got := old.Hash().String(); got != "e21ef19fa3f6fda9390977b80bcc0d7e6b00c4ea18e99bba8ad57c35463ffe04" {
		t.Fatalf("a vote's hash changed: %s", got)
	}
	a := r
	a.Answer = &Answer{ElapsedMs: 2400, Score: 940, RTTMs: 38}
	if a.Hash() == r.Hash() {
		t.Fatal("the answer does not change the record's hash")
	}
	back, err := DecodeRecord(a.AppendBinary(nil))
	if err != nil || !reflect.DeepEqual(back.Answer, a.Answer) {
		t.Fatalf("binary round trip: %+v, %v", back.Answer, err)
	}
	line, err := a.MarshalJSON()
	if err != nil || !bytes.Contains(line, []byte(`"answer":{"elapsed_ms":2400,"score":940,"rtt_ms":38}`)) {
		t.Fatalf("NDJSON: %s %v", line, err)
	}
	j, err := DecodeRecordJSON(line)
	if err != nil || !reflect.DeepEqual(j.Answer, a.Answer) || j.Hash() != a.Hash() {
		t.Fatalf("NDJSON round trip: %+v %v", j.Answer, err)
	}
	// Tampering with the score in an export breaks the line's hash.
	forged := bytes.Replace(line, []byte(`"score":940`), []byte(`"score":1000`), 1)
	if _, err := DecodeRecordJSON(forged); !errors.Is(err, ErrChain) {
		t.Fatalf("a forged score: %v", err)
	}
	if line, _ := r.MarshalJSON(); bytes.Contains(line, []byte("answer")) {
		t.Fatalf("a vote's export mentions answers: %s", line)
	}
	named := r
	named.Answer = &Answer{ElapsedMs: 1, Score: 999, RTTMs: -1, Name: "Zoë"}
	if back, err := DecodeRecord(named.AppendBinary(nil)); err != nil || back.Answer.Name != "Zoë" {
		t.Fatalf("a named answer: %+v %v", back.Answer, err)
	}
	for name, bad := range map[string]Answer{
		"name too long":    {Name: strings.Repeat("n", MaxNameLen+1)},
		"name with a bell": {Name: "a\a"},
		"negative elapsed": {ElapsedMs: -1},
		"elapsed too long": {ElapsedMs: MaxElapsedMs + 1},
		"negative score":   {Score: -1},
		"score too high":   {Score: MaxScore + 1},
		"rtt below -1":     {RTTMs: -2},
		"rtt too long":     {RTTMs: MaxRTTMs + 1},
	} {
		x := r
		x.Answer = &bad
		if err := x.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := DecodeRecord(x.AppendBinary(nil)); !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrMalformed) {
			t.Errorf("%s decoded: %v", name, err)
		}
	}
}

// A display name goes on air: what would deface a screen or pass for
// another name is refused, every script's ordinary name is not.
func TestValidName(t *testing.T) {
	for _, ok := range []string{"Ann", "Zoë", "José María", "ñandú", "李小龙", "עדי בן־דוד", "محمد", "क्षत्रिय", "Việt",
		"e\u0301\u0302", "👩\u200d👩\u200d👧", "❤\ufe0f", "می\u200cخواهم", "क्\u200dष", "🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F", "R2-D2", strings.Repeat("W", MaxNameRunes)} {
		if err := ValidName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for name, bad := range map[string]string{
		"empty": "", "too many characters": strings.Repeat("é", MaxNameRunes+1), "bidi override": "Ann\u202e",
		"zero-width space": "A\u200bnn", "soft hyphen": "An\u00adn", "control": "Ann\x07",
		"zalgo": "a" + strings.Repeat("\u0301", 39), "mark first": "\u0301a", "spaces only": "   ",
		"leading space": " Ann", "trailing space": "Ann ", "line separator": "Line\u2028Sep", "tab": "A\tB",
		"joiner alone": "\u200d", "joiner at the end": "Ann\u200d", "tags only": "\U000E0041\U000E0042",
		"Ann and tags": "Ann\U000E0041", "hangul filler": "\u3164", "braille blanks": "\u2800\u2800",
		"no-break space only": "\u00a0",
		// What an outside review got past the first version of the rule:
		"marks split by joiners": "Z" + strings.Repeat("\u0301", 4) + "\u200d" + strings.Repeat("\u0301", 4),
		"joiner in Latin":        "An\u200dn", "non-joiner in Latin": "An\u200cn",
		"grapheme joiner": "Ann\u034f", "variation selector on a letter": "Ann\ufe0f",
		"Khmer invisible vowels": "A\u17b4nn", "filler before a name": "\u3164Ann", "filler inside": "An\u115fn",
		"tags with no cancel": "Ann🏴\U000E0061\U000E006E\U000E006E", "unassigned": "An\u0378n",
	} {
		if err := ValidName(bad); err == nil {
			t.Errorf("%s: %q accepted", name, bad)
		}
	}
}
