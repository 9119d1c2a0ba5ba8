package session

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors of Verify, each with its own API code.
var (
	ErrMalformed = errors.New("session: malformed token")
	ErrForged    = errors.New("session: bad signature")
	ErrExpired   = errors.New("session: token expired")
	ErrMismatch  = errors.New("session: token issued to another client")
)

const (
	tokenPrefix = "s1."
	// A token's payload: version, voter, issued (ms), client hash, flags,
	// slot and, from version 4, since (ms): when its voter id was first
	// issued. A version 3 token (the release before) is still read, its
	// voter's first issue being its own.
	tokenPayloadV3 = 1 + 16 + 8 + 8 + 1 + 2
	tokenPayload   = tokenPayloadV3 + 8
	tokenVersion   = 4
	flagPoW        = 1 // issued after a solved puzzle
	macSize        = 16
	// MaxTokenLen bounds a token on the wire.
	MaxTokenLen = 128
)

// Signer issues and verifies tokens and challenges.
type Signer struct {
	secrets [][]byte // the first signs; every one verifies (a rotation)
	ttl     time.Duration
	now     func() time.Time
	issuer  [8]byte // random per Signer: only the process that issued a challenge redeems it
}

// NewSigner returns a signer; secret must be at least 16 bytes.
func NewSigner(secret []byte, ttl time.Duration, now func() time.Time) (*Signer, error) {
	return NewRotatingSigner([][]byte{secret}, ttl, now)
}

// NewRotatingSigner returns a signer that signs with the first secret and
// accepts tokens and challenges signed with any of them, so a new secret
// can be rolled out before the old one is dropped. Each secret must be at
// least 16 bytes.
func NewRotatingSigner(secrets [][]byte, ttl time.Duration, now func() time.Time) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, errors.New("session: no secret")
	}
	for _, secret := range secrets {
		if len(secret) < 16 {
			return nil, errors.New("session: secret must be at least 16 bytes")
		}
	}
	if now == nil {
		now = time.Now
	}
	sg := &Signer{secrets: secrets, ttl: ttl, now: now}
	if _, err := rand.Read(sg.issuer[:]); err != nil {
		return nil, err
	}
	return sg, nil
}

// Token is a verified voter token.
type Token struct {
	Voter  string    // 32 hex characters
	Issued time.Time // when it was issued
	// Since is when its voter id was first issued: a token passed on as
	// "previous" hands its voter and this time to the next one, so a voter
	// id lives as long as its first token allows, however often passed.
	Since time.Time
	PoW   bool // issued after a solved proof-of-work puzzle
	// Slot is the token's place among the tokens its client's address
	// group held when it was issued, across the cluster (1: the first);
	// the caller decides what a slot is worth (ingest/budget.go).
	Slot int
}

// MaxSlot is the largest slot a token records; later ones record it.
const MaxSlot = 1<<16 - 1

// BoundUserAgent is how much of a User-Agent binds a token: an edge
// relays no more of it (relay.MaxUserAgent), so a token issued at a full
// node holds at an edge and the other way round, however long the header.
const BoundUserAgent = 1024

// ClientHash binds a token to a client: its IP address and user agent (its
// first BoundUserAgent bytes).
func ClientHash(ip, userAgent string) [8]byte {
	if len(userAgent) > BoundUserAgent {
		userAgent = userAgent[:BoundUserAgent]
	}
	h := sha256.Sum256([]byte(ip + "\x00" + userAgent))
	return [8]byte(h[:8])
}

// Issue returns a new token for a new random voter; pow records that the
// client solved a puzzle for it, slot its place in its address group
// (clamped to [1, MaxSlot]).
func (s *Signer) Issue(client [8]byte, pow bool, slot int) (string, Token, error) {
	var voter [16]byte
	if _, err := rand.Read(voter[:]); err != nil {
		return "", Token{}, err
	}
	return s.IssueFor(voter, time.Time{}, client, pow, slot)
}

// VoterOf returns the voter of a token this signer (or a secret of its
// rotation) signed, whatever its age and the client it was issued to, and
// since when that voter id exists (its first token's issue): a client
// refused for its new network or the token's age presents it to earn a
// new token for the same voter (Pipeline.Session), so the person keeps
// one voter id, and one counted vote, when their network moves.
func (s *Signer) VoterOf(token string) (voter [16]byte, since time.Time, err error) {
	p, err := s.payload(token)
	if err != nil {
		return [16]byte{}, time.Time{}, err
	}
	return [16]byte(p[1:17]), sinceOf(p), nil
}

// sinceOf is a payload's first issue of its voter id: its own issue in a
// version 3 token.
func sinceOf(p []byte) time.Time {
	if len(p) == tokenPayloadV3 {
		return time.UnixMilli(int64(binary.BigEndian.Uint64(p[17:25])))
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(p[tokenPayloadV3:tokenPayload])))
}

// IssueFor returns a new token for voter, bound to client, whose voter id
// was first issued at since (a later since, or the zero time, is now).
func (s *Signer) IssueFor(voter [16]byte, since time.Time, client [8]byte, pow bool, slot int) (string, Token, error) {
	slot = min(max(slot, 1), MaxSlot)
	now := s.now()
	if since.IsZero() || since.After(now) {
		since = now
	}
	p := make([]byte, 0, tokenPayload)
	p = append(p, tokenVersion)
	p = append(p, voter[:]...)
	p = binary.BigEndian.AppendUint64(p, uint64(now.UnixMilli()))
	p = append(p, client[:]...)
	var flags byte
	if pow {
		flags |= flagPoW
	}
	p = append(p, flags)
	p = binary.BigEndian.AppendUint16(p, uint16(slot))
	p = binary.BigEndian.AppendUint64(p, uint64(since.UnixMilli()))
	return tokenPrefix + enc(p) + "." + enc(s.mac("token", p)), Token{Voter: hex.EncodeToString(voter[:]), Issued: time.UnixMilli(now.UnixMilli()),
		Since: time.UnixMilli(since.UnixMilli()), PoW: pow, Slot: slot}, nil
}

// payload returns a token's signed payload once its form and signature
// are checked.
func (s *Signer) payload(token string) ([]byte, error) {
	if len(token) > MaxTokenLen || !strings.HasPrefix(token, tokenPrefix) {
		return nil, ErrMalformed
	}
	body, sig, ok := strings.Cut(token[len(tokenPrefix):], ".")
	if !ok {
		return nil, ErrMalformed
	}
	p, err1 := dec(body)
	mac, err2 := dec(sig)
	if err1 != nil || err2 != nil || !(len(p) == tokenPayload && p[0] == tokenVersion || len(p) == tokenPayloadV3 && p[0] == 3) || len(mac) != macSize {
		return nil, ErrMalformed
	}
	if !s.verify("token", p, mac) {
		return nil, ErrForged
	}
	return p, nil
}

// Verify checks a token's form, signature, age and client.
func (s *Signer) Verify(token string, client [8]byte) (Token, error) {
	p, err := s.payload(token)
	if err != nil {
		return Token{}, err
	}
	issued := time.UnixMilli(int64(binary.BigEndian.Uint64(p[17:25])))
	if age := s.now().Sub(issued); age > s.ttl || age < -time.Minute {
		return Token{}, fmt.Errorf("%w: issued %s ago", ErrExpired, age.Round(time.Second))
	}
	if !hmac.Equal(p[25:33], client[:]) {
		return Token{}, ErrMismatch
	}
	slot := int(binary.BigEndian.Uint16(p[34:36]))
	if slot == 0 {
		return Token{}, ErrMalformed
	}
	return Token{Voter: hex.EncodeToString(p[1:17]), Issued: issued, Since: sinceOf(p), PoW: p[33]&flagPoW != 0, Slot: slot}, nil
}

// mac signs b in a domain (token or challenge) with the first secret,
// truncated to 16 bytes.
func (s *Signer) mac(domain string, b []byte) []byte { return macWith(s.secrets[0], domain, b) }

// verify reports whether mac signs b in domain under any of the secrets.
func (s *Signer) verify(domain string, b, mac []byte) bool {
	ok := false
	for _, secret := range s.secrets {
		ok = hmac.Equal(mac, macWith(secret, domain, b)) || ok
	}
	return ok
}

func macWith(secret []byte, domain string, b []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(domain))
	m.Write([]byte{0})
	m.Write(b)
	return m.Sum(nil)[:macSize]
}

func enc(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func dec(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
