package session

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newSigner(t testing.TB) (*Signer, *clock) {
	c := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	s, err := NewSigner([]byte("0123456789abcdef0123"), time.Hour, c.now)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func TestTokens(t *testing.T) {
	s, c := newSigner(t)
	me, other := ClientHash("203.0.113.7", "phone"), ClientHash("198.51.100.9", "phone")
	tok, issued, err := s.Issue(me, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Verify(tok, me)
	if err != nil || got.Voter != issued.Voter || len(got.Voter) != 32 || !got.PoW {
		t.Fatalf("verify: %+v %v", got, err)
	}
	second, _, _ := s.Issue(me, true, 1)
	if g2, _ := s.Verify(second, me); g2.Voter == got.Voter {
		t.Fatal("two tokens share a voter id")
	}
	other2, _ := NewSigner([]byte("another secret of 20b"), time.Hour, c.now)
	foreign, _, _ := other2.Issue(me, false, 1)
	body := tok[len(tokenPrefix):strings.LastIndex(tok, ".")]
	cases := map[string]struct {
		tok    string
		client [8]byte
		want   error
	}{
		"empty":                 {"", me, ErrMalformed},
		"garbage":               {"hello", me, ErrMalformed},
		"no signature":          {tokenPrefix + body, me, ErrMalformed},
		"bad base64":            {tokenPrefix + "!!!." + "???", me, ErrMalformed},
		"huge":                  {tokenPrefix + strings.Repeat("A", 500), me, ErrMalformed},
		"other secret (forged)": {foreign, me, ErrForged},
		"tampered payload":      {tokenPrefix + flip(body) + tok[strings.LastIndex(tok, "."):], me, ErrForged},
		"another IP":            {tok, other, ErrMismatch},
	}
	for name, c := range cases {
		if _, err := s.Verify(c.tok, c.client); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
	}
	c.t = c.t.Add(2 * time.Hour)
	if _, err := s.Verify(tok, me); !errors.Is(err, ErrExpired) {
		t.Errorf("expired: got %v", err)
	}
}

// flip changes one character of a base64 string.
func flip(s string) string {
	b := []byte(s)
	if b[3] == 'A' {
		b[3] = 'B'
	} else {
		b[3] = 'A'
	}
	return string(b)
}

// solve finds a nonce by brute force, as the page's worker does.
func solve(challenge string, bits int) string {
	for i := 0; ; i++ {
		n := strconv.Itoa(i)
		if LeadingZeroBits(challenge, n) >= bits {
			return n
		}
	}
}

func TestProofOfWork(t *testing.T) {
	s, c := newSigner(t)
	me, other := ClientHash("203.0.113.7", "ua"), ClientHash("203.0.113.8", "ua")
	var used Used
	ch, err := s.Challenge(10, me)
	if err != nil {
		t.Fatal(err)
	}
	nonce := solve(ch, 10)
	wrong := nonce
	for LeadingZeroBits(ch, wrong) >= 10 {
		wrong += "0"
	}
	if err := s.Check(ch, wrong, me, &used); !errors.Is(err, ErrBadSolution) {
		t.Fatalf("wrong solution: %v", err)
	}
	if err := s.Check(ch, nonce, other, &used); !errors.Is(err, ErrMismatch) {
		t.Fatalf("another client: %v", err)
	}
	if err := s.Check(ch, nonce, me, &used); err != nil {
		t.Fatalf("right solution: %v", err)
	}
	if err := s.Check(ch, nonce, me, &used); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replayed solution: %v", err)
	}
	for name, bad := range map[string]string{"garbage": "x", "tampered": challengePrefix + flip(ch[len(challengePrefix):])} {
		if err := s.Check(bad, "1", me, &used); !errors.Is(err, ErrBadChallenge) && !errors.Is(err, ErrForged) {
			t.Errorf("%s challenge: %v", name, err)
		}
	}
	late, _ := s.Challenge(1, me)
	c.t = c.t.Add(3 * time.Minute)
	if err := s.Check(late, solve(late, 1), me, &used); !errors.Is(err, ErrChallengeExpired) {
		t.Fatalf("expired challenge: %v", err)
	}
}

func FuzzVerify(f *testing.F) {
	s, _ := newSigner(f)
	tok, _, _ := s.Issue(ClientHash("a", "b"), false, 1)
	f.Add(tok)
	f.Add("s1..")
	f.Fuzz(func(t *testing.T, tok string) {
		if _, err := s.Verify(tok, ClientHash("a", "b")); err == nil && !strings.HasPrefix(tok, tokenPrefix) {
			t.Fatal("accepted a token without the prefix")
		}
	})
}

func FuzzCheck(f *testing.F) {
	s, _ := newSigner(f)
	ch, _ := s.Challenge(1, ClientHash("a", "b"))
	f.Add(ch, "1")
	f.Fuzz(func(t *testing.T, ch, nonce string) {
		var used Used
		s.Check(ch, nonce, ClientHash("a", "b"), &used) // must not panic
	})
}

// BenchmarkSolve measures what a token costs a script in native code: the
// expected 2^bits hashes of a puzzle (printed per solve, for 16 bits).
func BenchmarkSolve(b *testing.B) {
	s, _ := newSigner(b)
	for b.Loop() {
		ch, _ := s.Challenge(16, ClientHash("a", "b"))
		solve(ch, 16)
	}
}

// A token carries the slot it was issued with, clamped to [1, MaxSlot],
// under the signature.
func TestTokenSlot(t *testing.T) {
	s, _ := newSigner(t)
	me := ClientHash("203.0.113.7", "phone")
	for _, c := range []struct{ give, want int }{{-5, 1}, {0, 1}, {1, 1}, {11, 11}, {MaxSlot, MaxSlot}, {MaxSlot + 9, MaxSlot}} {
		tok, issued, err := s.Issue(me, true, c.give)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Verify(tok, me)
		if err != nil || got.Slot != c.want || issued.Slot != c.want {
			t.Errorf("slot %d: verified %d, issued %d, %v; want %d", c.give, got.Slot, issued.Slot, err, c.want)
		}
	}
}

// A puzzle past MaxPowBits is refused, not wrapped into a byte.
func TestChallengeDifficultyIsBounded(t *testing.T) {
	s, _ := newSigner(t)
	me := ClientHash("203.0.113.7", "phone")
	for _, bits := range []int{-1, MaxPowBits + 1, 300} {
		if _, err := s.Challenge(bits, me); err == nil {
			t.Errorf("difficulty %d was taken", bits)
		}
	}
	if _, err := s.Challenge(MaxPowBits, me); err != nil {
		t.Fatal(err)
	}
}

// VoterOf reads the voter of any token this signer signed — issued to
// another client, or expired — so a client on a new network keeps its
// voter; a forged or another cluster's token has none.
func TestVoterOfAndIssueFor(t *testing.T) {
	s, c := newSigner(t)
	wifi, cell := ClientHash("203.0.113.7", "phone"), ClientHash("198.51.100.9", "phone")
	old, issued, err := s.Issue(wifi, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(2 * time.Hour) // expired too
	voter, at, err := s.VoterOf(old)
	if err != nil || !at.Equal(issued.Issued) {
		t.Fatalf("VoterOf: issued %v (want %v), %v", at, issued.Issued, err)
	}
	tok, again, err := s.IssueFor(voter, at, cell, true, 3)
	if err != nil || again.Voter != issued.Voter || again.Slot != 3 || !again.Since.Equal(issued.Issued) {
		t.Fatalf("reissued: %+v %v, want voter %s since %v", again, err, issued.Voter, issued.Issued)
	}
	if _, since, _ := s.VoterOf(tok); !since.Equal(issued.Issued) {
		t.Fatalf("the reissued token's voter dates from %v, want its first issue %v", since, issued.Issued)
	}
	if got, err := s.Verify(tok, cell); err != nil || got.Voter != issued.Voter {
		t.Fatalf("the new token on the new network: %+v %v", got, err)
	}
	if _, err := s.Verify(tok, wifi); !errors.Is(err, ErrMismatch) {
		t.Fatalf("the new token on the old network: %v", err)
	}
	other, _ := NewSigner([]byte("another secret of 20b"), time.Hour, c.now)
	foreign, _, _ := other.Issue(wifi, true, 1)
	for _, bad := range []string{foreign, old[:len(old)-2] + "AA", "", "s1.", strings.Repeat("s1.x", 1000)} {
		if _, _, err := s.VoterOf(bad); err == nil {
			t.Errorf("VoterOf(%.24q) gave a voter", bad)
		}
	}
}

// A token of the release before (version 3, no "since") still verifies,
// and its voter id dates from its own issue.
func TestVersion3TokenStillReads(t *testing.T) {
	s, _ := newSigner(t)
	wifi := ClientHash("203.0.113.7", "phone")
	voter := [16]byte{1, 2, 3}
	issued := s.now().UnixMilli()
	p := []byte{3}
	p = append(p, voter[:]...)
	p = binary.BigEndian.AppendUint64(p, uint64(issued))
	p = append(p, wifi[:]...)
	p = append(p, flagPoW)
	p = binary.BigEndian.AppendUint16(p, 2)
	old := tokenPrefix + enc(p) + "." + enc(s.mac("token", p))
	got, err := s.Verify(old, wifi)
	if err != nil || got.Slot != 2 || !got.PoW || got.Since.UnixMilli() != issued {
		t.Fatalf("a version 3 token: %+v %v", got, err)
	}
	if v, since, err := s.VoterOf(old); err != nil || v != voter || since.UnixMilli() != issued {
		t.Fatalf("VoterOf a version 3 token: %x %v %v", v, since, err)
	}
}
