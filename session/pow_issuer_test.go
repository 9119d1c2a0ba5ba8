package session

import (
	"errors"
	"strconv"
	"testing"
	"time"
)

// A solution is redeemable once, at the signer that issued its challenge:
// another node with the same secret, or the same node after a restart (a
// new Signer), refuses it.
func TestChallengeRedeemableOnlyByItsIssuer(t *testing.T) {
	secret := []byte("a shared session secret of 32 b!")
	a, _ := NewSigner(secret, time.Hour, nil)
	b, _ := NewSigner(secret, time.Hour, nil)
	client := ClientHash("203.0.113.7", "phone")
	ch, err := a.Challenge(4, client)
	if err != nil {
		t.Fatal(err)
	}
	nonce := 0
	for LeadingZeroBits(ch, strconv.Itoa(nonce)) < 4 {
		nonce++
	}
	var usedA, usedB Used
	if err := b.Check(ch, strconv.Itoa(nonce), client, &usedB); !errors.Is(err, ErrOtherIssuer) {
		t.Fatalf("at another node: %v", err)
	}
	if err := a.Check(ch, strconv.Itoa(nonce), client, &usedA); err != nil {
		t.Fatalf("at its issuer: %v", err)
	}
	if err := a.Check(ch, strconv.Itoa(nonce), client, &usedA); !errors.Is(err, ErrReplayed) {
		t.Fatalf("twice at its issuer: %v", err)
	}
	restarted, _ := NewSigner(secret, time.Hour, nil)
	if err := restarted.Check(ch, strconv.Itoa(nonce), client, &Used{}); !errors.Is(err, ErrOtherIssuer) {
		t.Fatalf("after a restart: %v", err)
	}
}
