package session

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/bits"
	"strings"
	"sync"
	"time"
)

// Errors of Solve checks.
var (
	ErrBadSolution = errors.New("session: wrong proof-of-work solution")
	ErrReplayed    = errors.New("session: challenge already used")
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

// Challenge returns a signed puzzle of the given difficulty for a client.
func (s *Signer) Challenge(difficulty int, client [8]byte) (string, error) {
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
	if len(challenge) > MaxChallengeLen || len(nonce) == 0 || len(nonce) > MaxNonceLen || !strings.HasPrefix(challenge, challengePrefix) {
		return ErrMalformed
	}
	body, sig, ok := strings.Cut(challenge[len(challengePrefix):], ".")
	if !ok {
		return ErrMalformed
	}
	p, err1 := dec(body)
	mac, err2 := dec(sig)
	if err1 != nil || err2 != nil || len(p) != challengePayload || p[0] != 2 || len(mac) != macSize {
		return ErrMalformed
	}
	if !s.verify("challenge", p, mac) {
		return ErrForged
	}
	expires := time.UnixMilli(int64(binary.BigEndian.Uint64(p[17:25])))
	if s.now().After(expires) {
		return ErrExpired
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
