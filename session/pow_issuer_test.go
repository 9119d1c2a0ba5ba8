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

// During a rotation the signer signs with the first secret and accepts
// every one: tokens of the old secret keep working, a token of an unknown
// secret does not.
func TestRotatingSecrets(t *testing.T) {
	oldS, newS := []byte("the old session secret, 32 bytes"), []byte("the new session secret, 32 bytes")
	before, _ := NewSigner(oldS, time.Hour, nil)
	during, err := NewRotatingSigner([][]byte{newS, oldS}, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := NewSigner(newS, time.Hour, nil)
	client := ClientHash("203.0.113.7", "phone")
	oldTok, _, _ := before.Issue(client, false, 1)
	newTok, _, _ := during.Issue(client, false, 1)
	if _, err := during.Verify(oldTok, client); err != nil {
		t.Fatalf("an old token during the rotation: %v", err)
	}
	if _, err := after.Verify(newTok, client); err != nil {
		t.Fatalf("a token of the new secret after it: %v", err)
	}
	if _, err := after.Verify(oldTok, client); !errors.Is(err, ErrForged) {
		t.Fatalf("an old token after the rotation: %v", err)
	}
	if _, err := NewRotatingSigner([][]byte{newS, []byte("short")}, time.Hour, nil); err == nil {
		t.Fatal("a short secret in the ring was taken")
	}
}
