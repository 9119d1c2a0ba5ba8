package ids

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// A join code is what a screen prints next to its QR code for those who
// type rather than scan (like slido.com's #code): six characters of an
// alphabet without the ones misread aloud or on a screen (0/O, 1/I/L, U),
// derived from what it joins, so every node (and the page, and a
// broadcaster's own page through the JavaScript client) computes the same
// one with nothing to store or replicate. A node resolves it by computing
// the codes of what it holds.

// Kinds of what a join code joins.
const (
	JoinPoll  = "poll"
	JoinEvent = "event" // an event's current poll
	JoinQuiz  = "quiz"
)

// JoinAlphabet is the join codes' characters; JoinCodeLen their length.
const (
	JoinAlphabet = "23456789ABCDEFGHJKMNPQRSTVWXYZ"
	JoinCodeLen  = 6
)

// ErrJoinCode is the error of a string that is no join code.
var ErrJoinCode = errors.New("ids: join code")

// joinSpace is 30^6: the number of codes.
const joinSpace = 729_000_000

// JoinCode returns the join code of a poll, an event or a quiz: the first
// 32 bits of SHA-256("tally join v1\x00" ‖ kind ‖ "\x00" ‖ id), modulo
// 30^6, in base 30, most significant digit first. clients/js computes the
// same (joinCode).
func JoinCode(kind, id string) string {
	sum := sha256.Sum256([]byte("tally join v1\x00" + kind + "\x00" + id))
	n := binary.BigEndian.Uint32(sum[:4]) % joinSpace
	var b [JoinCodeLen]byte
	for i := JoinCodeLen - 1; i >= 0; i-- {
		b[i] = JoinAlphabet[n%30]
		n /= 30
	}
	return string(b[:])
}

// ParseJoinCode reads a join code as a person types it: any case, with
// spaces, dashes, dots or a leading '#' ignored.
func ParseJoinCode(s string) (string, error) {
	if len(s) > 32 {
		return "", fmt.Errorf("%w: too long (%d bytes): a code is %d characters", ErrJoinCode, len(s), JoinCodeLen)
	}
	var b strings.Builder
	for _, r := range strings.ToUpper(s) {
		switch {
		case r == ' ' || r == '-' || r == '.' || r == '#':
		case r < 128 && strings.IndexByte(JoinAlphabet, byte(r)) >= 0:
			b.WriteRune(r)
		default:
			return "", fmt.Errorf("%w: %q is not in a code (codes use %s)", ErrJoinCode, r, JoinAlphabet)
		}
	}
	if b.Len() != JoinCodeLen {
		return "", fmt.Errorf("%w: %d characters, a code has %d", ErrJoinCode, b.Len(), JoinCodeLen)
	}
	return b.String(), nil
}
