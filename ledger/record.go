package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"tally/hlc"
	"tally/ids"
	"tally/internal/wire"
)

var (
	// ErrInvalid is returned for a record that breaks the record rules.
	ErrInvalid = errors.New("ledger: invalid record")
	// ErrMalformed is returned when bytes or lines cannot be decoded.
	ErrMalformed = errors.New("ledger: malformed input")
)

// Field limits. IDs (poll, replica) are short and plain so they can be used
// in keys, file names and vote ids; voter, option and idempotency keys are
// client-chosen text.
const (
	MaxIDLen     = ids.MaxLen
	MaxVoterLen  = 128
	MaxOptionLen = 64
	MaxIdemLen   = 128
	MaxIPHashLen = 64
)

// Hash is a SHA-256 digest.
type Hash [sha256.Size]byte

// String returns the hash in hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// MarshalText encodes the hash as hex.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText decodes a hex hash.
func (h *Hash) UnmarshalText(b []byte) error {
	if hex.DecodedLen(len(b)) != len(h) {
		return fmt.Errorf("%w: hash must be %d hex digits", ErrMalformed, 2*len(h))
	}
	if _, err := hex.Decode(h[:], b); err != nil {
		return fmt.Errorf("%w: hash: %w", ErrMalformed, err)
	}
	return nil
}

// Record is one vote as ledgered by one replica.
type Record struct {
	Poll    string  // poll id
	Replica string  // replica that accepted the vote
	Seq     uint64  // 1, 2, 3, … per (poll, replica)
	Wall    int64   // HLC wall time, ms
	Logical uint32  // HLC logical counter
	Voter   string  // voter id (client-chosen, anonymous)
	Option  string  // option id
	Idem    string  // idempotency key
	Trust   float64 // trust score in [0, 1]
	Counted bool    // counted in the live tally when accepted
	Late    bool    // arrived after close, within grace
	IPHash  string  // salted hash of the client IP, hex
	Prev    Hash    // SHA-256 of the previous record of (poll, replica); zero for seq 1
	// Signals are what the trust score was computed from, kept so an
	// auditor can re-run the filter; nil for records written without them.
	Signals *Signals
	// Answer is set on a quiz answer: the time its node measured and the
	// score it earned (docs/quiz.md); nil for a poll vote.
	Answer *Answer

	// sum is the record's hash when a reader already computed it from the
	// canonical bytes it decoded (ReadStream), or the ledger from the
	// bytes it stored (Append): the chain check, and a vote's receipt, then
	// do not encode and hash the record again. Cleared, then set anew,
	// when the ledger assigns a record's place in a chain.
	sum    Hash
	summed bool
}

// Signals are a vote's trust signals as ledgered (see trust.Signals).
type Signals struct {
	SincePrevMs   int64  `json:"since_prev_ms"`    // since the voter's previous vote; 0: none
	IPVotesPerMin uint64 `json:"ip_votes_per_min"` // the address's votes over the last minute
	IPVoters      uint64 `json:"ip_voters"`        // distinct voters from the address in 10 minutes
	TokenAgeMs    int64  `json:"token_age_ms"`     // -1: no token
	SocketAgeMs   int64  `json:"socket_age_ms"`    // -1: not over a socket
	Datacenter    bool   `json:"datacenter"`
	OverBudget    bool   `json:"over_budget,omitempty"` // the token was past its address group's vouched ones
}

// Answer is what a quiz answer's record adds to a vote's: the node's own
// measurement of the participant's time, the score it gave, and the
// participant's round trip to the node, the one unfairness left.
type Answer struct {
	ElapsedMs int64  `json:"elapsed_ms"`     // question shown → answer received, at the serving node
	Score     int64  `json:"score"`          // quiz.Score of it
	RTTMs     int64  `json:"rtt_ms"`         // the participant's last WebSocket ping round trip; -1: not measured
	Name      string `json:"name,omitempty"` // the display name the participant answered under; "" for none
}

// Bounds of an answer's numbers: a question lasts at most 10 minutes and
// is worth at most 10,000 points (package quiz).
const (
	MaxElapsedMs = 10 * 60 * 1000
	MaxScore     = 10_000
	MaxRTTMs     = 60 * 1000
	// A display name is at most MaxNameRunes characters in at most
	// MaxNameLen bytes (40 four-byte characters). Before 2026-12 the bound
	// was 32 bytes: an older node refuses a longer name it is sent.
	MaxNameLen   = 160
	MaxNameRunes = 40
)

// HLC returns the record's hybrid logical timestamp, replica included.
func (r *Record) HLC() hlc.Timestamp {
	return hlc.Timestamp{Wall: r.Wall, Logical: r.Logical, Replica: r.Replica}
}

// ID returns the record's vote id.
func (r *Record) ID() VoteID { return VoteID{Replica: r.Replica, Seq: r.Seq} }

// Hash returns the SHA-256 of the record's canonical encoding, the link the
// next record of the chain stores in Prev.
func (r *Record) Hash() Hash {
	if r.summed {
		return r.sum
	}
	var buf [512]byte // fits every valid record; larger ones spill to the heap
	return sha256.Sum256(r.AppendBinary(buf[:0]))
}

// KeepHash computes the record's hash once and keeps it, so later Hash
// calls are free: for records held unchanged (a certifier's copies of a
// chain). A record changed after KeepHash must not be hashed again.
func (r *Record) KeepHash() Hash {
	if !r.summed {
		r.sum, r.summed = r.Hash(), true
	}
	return r.sum
}

// After orders records by (HLC, replica, seq): the order that decides which
// of a voter's votes is the latest and which copy of a retry is the first.
func (r *Record) After(o *Record) bool {
	if r.Wall != o.Wall {
		return r.Wall > o.Wall
	}
	if r.Logical != o.Logical {
		return r.Logical > o.Logical
	}
	if r.Replica != o.Replica {
		return r.Replica > o.Replica
	}
	return r.Seq > o.Seq
}

// VoteID names one ledgered vote: the replica that accepted it and its
// sequence number there.
type VoteID struct {
	Replica string
	Seq     uint64
}

// String formats the id as "replica/seq".
func (v VoteID) String() string { return v.Replica + "/" + strconv.FormatUint(v.Seq, 10) }

// IsZero reports whether v is the zero id.
func (v VoteID) IsZero() bool { return v.Replica == "" && v.Seq == 0 }

// ParseVoteID reads the form written by VoteID.String.
func ParseVoteID(s string) (VoteID, error) {
	r, seq, ok := strings.Cut(s, "/")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !ok || err != nil || n == 0 || ValidID(r) != nil {
		return VoteID{}, fmt.Errorf("%w: vote id %q", ErrMalformed, s)
	}
	return VoteID{Replica: r, Seq: n}, nil
}

// ValidID checks a poll or replica id (see package ids).
func ValidID(s string) error { return ids.Valid(s) }

// ValidText checks client-chosen text (see package ids).
func ValidText(s string, max int) error { return ids.Text(s, max) }

// ValidName checks a participant's display name, which goes on air: 1–
// MaxNameRunes characters in at most MaxNameLen bytes, printable, with no
// invisible format character (ids.DisplayText: no bidi control can make
// it read as another name), and beyond that:
//   - something visible (a letter, digit, mark-free symbol or
//     punctuation that is not a blank look-alike such as U+3164 or U+2800);
//   - no space at either end and no whitespace but the plain space;
//   - at most maxMarks combining marks in a row (no "Zalgo" text drawn
//     across the screen);
//   - joiners (U+200C, U+200D) only between two characters, and tag
//     characters only in a flag's sequence (U+1F3F4, tags, U+E007F), so
//     "Ann" plus invisible tags does not pass for "Ann".
func ValidName(s string) error {
	if err := ids.DisplayText(s, MaxNameLen); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(s); n > MaxNameRunes {
		return fmt.Errorf("has %d characters, at most %d", n, MaxNameRunes)
	}
	return nameShape(s)
}

// maxMarks bounds the combining marks on one character (Vietnamese and
// Indic scripts stack two or three).
const maxMarks = 4

// invisible are characters that draw nothing yet are letters, symbols or
// marks: Hangul fillers, the braille blank, the combining grapheme
// joiner, Khmer's invisible vowels and Mongolian's variation selectors.
var invisible = map[rune]bool{'\u115F': true, '\u1160': true, '\u3164': true, '\uFFA0': true, '\u2800': true,
	'\u034F': true, '\u17B4': true, '\u17B5': true, '\u180B': true, '\u180C': true, '\u180D': true, '\u180F': true}

// isTag reports whether c is a tag character of a flag's sequence.
func isTag(c rune) bool { return c >= 0xE0020 && c <= 0xE007E }

// needsNoJoiner reports whether c is of a script that never joins with
// U+200C or U+200D (where one would only hide a look-alike).
func needsNoJoiner(c rune) bool {
	return unicode.In(c, unicode.Latin, unicode.Greek, unicode.Cyrillic) || unicode.IsDigit(c) || c == ' '
}

// nameShape checks what ValidName adds to ids.DisplayText.
func nameShape(s string) error {
	runes := []rune(s)
	if unicode.IsSpace(runes[0]) || unicode.IsSpace(runes[len(runes)-1]) {
		return errors.New("starts or ends with a space")
	}
	visible, marks, inTags := false, 0, false
	for i, c := range runes {
		prev, next := rune(0), rune(0)
		if i > 0 {
			prev = runes[i-1]
		}
		if i+1 < len(runes) {
			next = runes[i+1]
		}
		if inTags && !isTag(c) && c != 0xE007F {
			return errors.New("has a flag's tags with no cancel tag")
		}
		switch {
		case invisible[c]:
			return fmt.Errorf("contains U+%04X, which draws nothing", c)
		case unicode.IsSpace(c) && c != ' ':
			return fmt.Errorf("contains the whitespace U+%04X (only plain spaces)", c)
		case c >= 0xFE00 && c <= 0xFE0F: // variation selectors: an emoji's, not a letter's
			if prev == 0 || unicode.IsLetter(prev) || unicode.IsMark(prev) {
				return fmt.Errorf("has the variation selector U+%04X after a letter", c)
			}
		case unicode.In(c, unicode.Mn, unicode.Me, unicode.Mc):
			if marks++; marks > maxMarks || i == 0 || prev == '\u200c' || prev == '\u200d' {
				return fmt.Errorf("stacks combining marks (at most %d on one character)", maxMarks)
			}
			continue
		case c == '\u200c' || c == '\u200d':
			if i == 0 || i == len(runes)-1 || prev == '\u200c' || prev == '\u200d' || needsNoJoiner(prev) || needsNoJoiner(next) {
				return fmt.Errorf("has the joiner U+%04X outside a sequence", c)
			}
			continue // the marks before a joiner still count against the character
		case isTag(c):
			if prev != 0x1F3F4 && !isTag(prev) {
				return fmt.Errorf("has the tag character U+%04X outside a flag", c)
			}
			inTags = true
		case c == 0xE007F:
			if !isTag(prev) {
				return errors.New("has a cancel tag outside a flag")
			}
			inTags = false
		case unicode.IsLetter(c) || unicode.IsNumber(c) || unicode.IsPunct(c) || unicode.IsSymbol(c):
			visible = true
		case c != ' ':
			return fmt.Errorf("contains U+%04X, which is no letter, digit, mark, symbol or punctuation", c)
		}
		marks = 0
	}
	if inTags {
		return errors.New("has a flag's tags with no cancel tag")
	}
	if !visible {
		return errors.New("shows nothing: it needs a visible character")
	}
	return nil
}

// ValidateVote checks the fields a caller supplies to Append (everything
// but Replica, Seq and Prev, which the ledger assigns).
func (r *Record) ValidateVote() error {
	fail := func(field string, err error) error { return fmt.Errorf("%w: %s %w", ErrInvalid, field, err) }
	if err := ValidID(r.Poll); err != nil {
		return fail("poll", err)
	}
	if err := ValidText(r.Voter, MaxVoterLen); err != nil {
		return fail("voter", err)
	}
	if err := ValidText(r.Option, MaxOptionLen); err != nil {
		return fail("option", err)
	}
	if err := ValidText(r.Idem, MaxIdemLen); err != nil {
		return fail("idem", err)
	}
	if r.Wall <= 0 {
		return fail("hlc", errors.New("must be set"))
	}
	if math.IsNaN(r.Trust) || r.Trust < 0 || r.Trust > 1 {
		return fail("trust", fmt.Errorf("%v is outside [0, 1]", r.Trust))
	}
	if len(r.IPHash) > MaxIPHashLen {
		return fail("ip hash", fmt.Errorf("longer than %d", MaxIPHashLen))
	}
	if !isHex(r.IPHash) {
		return fail("ip hash", errors.New("is not hex"))
	}
	if a := r.Answer; a != nil {
		if a.ElapsedMs < 0 || a.ElapsedMs > MaxElapsedMs {
			return fail("answer elapsed_ms", fmt.Errorf("%d is outside 0-%d", a.ElapsedMs, MaxElapsedMs))
		}
		if a.Score < 0 || a.Score > MaxScore {
			return fail("answer score", fmt.Errorf("%d is outside 0-%d", a.Score, MaxScore))
		}
		if a.RTTMs < -1 || a.RTTMs > MaxRTTMs {
			return fail("answer rtt_ms", fmt.Errorf("%d is outside -1-%d", a.RTTMs, MaxRTTMs))
		}
		if a.Name != "" {
			if err := ValidText(a.Name, MaxNameLen); err != nil {
				return fail("answer name", err)
			}
			if n := utf8.RuneCountInString(a.Name); n > MaxNameRunes {
				return fail("answer name", fmt.Errorf("has %d characters, at most %d", n, MaxNameRunes))
			}
		}
	}
	return nil
}

// Validate checks a complete record, as read from an export.
func (r *Record) Validate() error {
	if err := r.ValidateVote(); err != nil {
		return err
	}
	if err := ValidID(r.Replica); err != nil {
		return fmt.Errorf("%w: replica %w", ErrInvalid, err)
	}
	if r.Seq == 0 {
		return fmt.Errorf("%w: seq must be at least 1", ErrInvalid)
	}
	if r.Seq == 1 && r.Prev != (Hash{}) {
		return fmt.Errorf("%w: first record of a chain has a previous hash", ErrInvalid)
	}
	return nil
}

const (
	encodingVersion = 1
	flagCounted     = 1 << 0
	flagLate        = 1 << 1
	flagSignals     = 1 << 2 // the trust signals follow the previous hash
	flagAnswer      = 1 << 3 // a quiz answer's numbers follow (after the signals)

	signalDatacenter = 1 << 0
	signalOverBudget = 1 << 1
)

// AppendBinary appends the canonical binary encoding of r to buf: the bytes
// stored in Pebble and hashed into the chain.
func (r *Record) AppendBinary(buf []byte) []byte {
	buf = append(buf, encodingVersion)
	buf = wire.AppendString(buf, r.Poll)
	buf = wire.AppendString(buf, r.Replica)
	buf = binary.AppendUvarint(buf, r.Seq)
	buf = binary.AppendUvarint(buf, uint64(r.Wall))
	buf = binary.AppendUvarint(buf, uint64(r.Logical))
	buf = wire.AppendString(buf, r.Voter)
	buf = wire.AppendString(buf, r.Option)
	buf = wire.AppendString(buf, r.Idem)
	buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(r.Trust))
	var flags byte
	if r.Counted {
		flags |= flagCounted
	}
	if r.Late {
		flags |= flagLate
	}
	if r.Signals != nil {
		flags |= flagSignals
	}
	if r.Answer != nil {
		flags |= flagAnswer
	}
	buf = append(buf, flags)
	buf = wire.AppendString(buf, r.IPHash)
	buf = append(buf, r.Prev[:]...)
	if sg := r.Signals; sg != nil {
		buf = binary.AppendVarint(buf, sg.SincePrevMs)
		buf = binary.AppendUvarint(buf, sg.IPVotesPerMin)
		buf = binary.AppendUvarint(buf, sg.IPVoters)
		buf = binary.AppendVarint(buf, sg.TokenAgeMs)
		buf = binary.AppendVarint(buf, sg.SocketAgeMs)
		var bits byte // bit 0: datacenter (the only one in older records), bit 1: over budget
		if sg.Datacenter {
			bits |= signalDatacenter
		}
		if sg.OverBudget {
			bits |= signalOverBudget
		}
		buf = append(buf, bits)
	}
	if a := r.Answer; a != nil {
		buf = binary.AppendVarint(buf, a.ElapsedMs)
		buf = binary.AppendVarint(buf, a.Score)
		buf = binary.AppendVarint(buf, a.RTTMs)
		buf = wire.AppendString(buf, a.Name)
	}
	return buf
}

// DecodeRecord decodes the canonical binary encoding and validates the
// result. Malformed or invalid input is an error, never a panic.
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	d := wire.NewCanonicalReader(b, ErrMalformed)
	if v := d.Byte(); d.Err() == nil && v != encodingVersion {
		return r, fmt.Errorf("%w: record encoding version %d", ErrMalformed, v)
	}
	r.Poll = d.String(MaxIDLen, "poll")
	r.Replica = d.String(MaxIDLen, "replica")
	r.Seq = d.Uvarint()
	wall := d.Uvarint()
	logical := d.Uvarint()
	if wall > math.MaxInt64 || logical > math.MaxUint32 {
		d.Fail("hlc out of range")
	}
	r.Wall, r.Logical = int64(wall), uint32(logical)
	r.Voter = d.String(MaxVoterLen, "voter")
	r.Option = d.String(MaxOptionLen, "option")
	r.Idem = d.String(MaxIdemLen, "idem")
	r.Trust = math.Float64frombits(binary.LittleEndian.Uint64(d.Bytes(8)))
	flags := d.Byte()
	if flags&^(flagCounted|flagLate|flagSignals|flagAnswer) != 0 {
		d.Fail("unknown flags %#x", flags)
	}
	r.Counted, r.Late = flags&flagCounted != 0, flags&flagLate != 0
	r.IPHash = d.String(MaxIPHashLen, "ip_hash")
	copy(r.Prev[:], d.Bytes(len(r.Prev)))
	if flags&flagSignals != 0 && d.Err() == nil {
		r.Signals = &Signals{SincePrevMs: d.Varint(), IPVotesPerMin: d.Uvarint(), IPVoters: d.Uvarint(),
			TokenAgeMs: d.Varint(), SocketAgeMs: d.Varint()}
		switch bits := d.Byte(); {
		case d.Err() != nil:
		case bits&^(signalDatacenter|signalOverBudget) != 0:
			d.Fail("signal flags %#x", bits)
		default:
			r.Signals.Datacenter, r.Signals.OverBudget = bits&signalDatacenter != 0, bits&signalOverBudget != 0
		}
	}
	if flags&flagAnswer != 0 && d.Err() == nil {
		r.Answer = &Answer{ElapsedMs: d.Varint(), Score: d.Varint(), RTTMs: d.Varint(), Name: d.String(MaxNameLen, "name")}
	}
	if d.Err() == nil && d.Len() != 0 {
		d.Fail("%d trailing bytes", d.Len())
	}
	if d.Err() != nil {
		return Record{}, d.Err()
	}
	if err := r.Validate(); err != nil {
		return Record{}, err
	}
	return r, nil
}

// isHex reports whether s is hex.DecodeString's input (an even number of
// hex digits) without decoding it: checked per vote.
func isHex(s string) bool {
	if len(s)%2 != 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
