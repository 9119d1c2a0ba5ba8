package session

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"time"
)

// Errors of Solve checks.
var (
	ErrBadSolution = errors.New("session: wrong proof-of-work solution")
	// ErrBadChallenge and ErrChallengeExpired are a challenge's own
	// malformed and expired (a token's are ErrMalformed and ErrExpired).
	ErrBadChallenge     = errors.New("session: malformed challenge")
	ErrChallengeExpired = errors.New("session: challenge expired")
	ErrReplayed         = errors.New("session: challenge already used")
	// ErrOtherIssuer is returned for a challenge issued by another node,
	// or by this node before a restart: a solution is redeemable once, at
	// the process that issued its challenge, so it cannot earn a second
	// token elsewhere in the cluster or after a restart.
	ErrOtherIssuer = errors.New("session: challenge issued by another node or before a restart")
)

const (
	challengePrefix  = "c2."
	challengePayload = 1 + 16 + 8 + 1 + 8 + 8 // version, nonce, expiry (ms), bits, client hash, issuer
	// MaxChallengeLen bounds a challenge on the wire.
	MaxChallengeLen = 128
	// MaxNonceLen bounds a solution's nonce.
	MaxNonceLen  = 32
	challengeTTL = 2 * time.Minute
)

// MaxPowBits bounds a puzzle's difficulty: 2^40 hashes is hours of a
// server's core, far past any phone; a node's base difficulty stays at or
// under MaxBasePowBits so the rise for busy addresses has room.
const (
	MaxPowBits     = 40
	MaxBasePowBits = 32
)

// Challenge returns a signed puzzle of the given difficulty for a client;
// a difficulty outside [0, MaxPowBits] is an error.
func (s *Signer) Challenge(difficulty int, client [8]byte) (string, error) {
	if difficulty < 0 || difficulty > MaxPowBits {
		return "", fmt.Errorf("session: puzzle difficulty %d: want 0-%d", difficulty, MaxPowBits)
	}
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", err
	}
	p := make([]byte, 0, challengePayload)
	p = append(p, 2)
	p = append(p, nonce[:]...)
	p = binary.BigEndian.AppendUint64(p, uint64(s.now().Add(challengeTTL).UnixMilli()))
	p = append(p, byte(difficulty))
	p = append(p, client[:]...)
	p = append(p, s.issuer[:]...)
	return challengePrefix + enc(p) + "." + enc(s.mac("challenge", p)), nil
}

// Check verifies a solution: the challenge is ours, unexpired, for this
// client, not used before, and SHA-256(challenge ":" nonce) has the
// challenge's number of leading zero bits. used records it (once).
func (s *Signer) Check(challenge, nonce string, client [8]byte, used *Used) error {
	return s.check(challenge, nonce, client, used, true)
}

// Precheck is Check without spending the solution: whether Check would
// take it now.
func (s *Signer) Precheck(challenge, nonce string, client [8]byte, used *Used) error {
	return s.check(challenge, nonce, client, used, false)
}

func (s *Signer) check(challenge, nonce string, client [8]byte, used *Used, spend bool) error {
	if len(nonce) == 0 || len(nonce) > MaxNonceLen {
		return fmt.Errorf("%w: the nonce must be 1-%d characters", ErrBadSolution, MaxNonceLen)
	}
	if len(challenge) > MaxChallengeLen || !strings.HasPrefix(challenge, challengePrefix) {
		return ErrBadChallenge
	}
	body, sig, ok := strings.Cut(challenge[len(challengePrefix):], ".")
	if !ok {
		return ErrBadChallenge
	}
	p, err1 := dec(body)
	mac, err2 := dec(sig)
	if err1 != nil || err2 != nil || len(p) != challengePayload || p[0] != 2 || len(mac) != macSize {
		return ErrBadChallenge
	}
	if !s.verify("challenge", p, mac) {
		return ErrForged
	}
	expires := time.UnixMilli(int64(binary.BigEndian.Uint64(p[17:25])))
	if s.now().After(expires) {
		return ErrChallengeExpired
	}
	if !hmac.Equal(p[26:34], client[:]) {
		return ErrMismatch
	}
	if !hmac.Equal(p[34:42], s.issuer[:]) {
		return ErrOtherIssuer
	}
	if LeadingZeroBits(challenge, nonce) < int(p[25]) {
		return ErrBadSolution
	}
	if !spend {
		if used.seenBefore(string(p[1:17])) {
			return ErrReplayed
		}
		return nil
	}
	if !used.first(string(p[1:17]), expires, s.now()) {
		return ErrReplayed
	}
	return nil
}

// LeadingZeroBits counts the leading zero bits of SHA-256(challenge ":" nonce).
func LeadingZeroBits(challenge, nonce string) int {
	h := sha256.Sum256([]byte(challenge + ":" + nonce))
	n := 0
	for _, b := range h {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}

// Used remembers solved challenges until they expire. The zero value is
// ready.
type Used struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// seenBefore reports whether the challenge id was spent.
func (u *Used) seenBefore(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.seen[id]
	return ok
}

func (u *Used) first(id string, expires, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.seen == nil {
		u.seen = map[string]time.Time{}
	}
	if len(u.seen) > 4096 { // sweep the expired ones now and then
		for k, e := range u.seen {
			if now.After(e) {
				delete(u.seen, k)
			}
		}
	}
	if _, ok := u.seen[id]; ok {
		return false
	}
	u.seen[id] = expires
	return true
}
