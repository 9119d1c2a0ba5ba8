package gossip

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealOpens(t *testing.T) {
	old, new := []byte("0123456789abcdef"), []byte("fedcba9876543210fedcba9876543210")
	msg := []byte("a gossip message")
	sealed := newKeyring([][]byte{old}).seal(msg)
	for name, ring := range map[string]keyring{
		"same key":              newKeyring([][]byte{old}),
		"rotation: old primary": newKeyring([][]byte{old, new}),
		"rotation: new primary": newKeyring([][]byte{new, old}),
	} {
		got, err := ring.open(sealed)
		if err != nil || !bytes.Equal(got, msg) {
			t.Errorf("%s: %q %v", name, got, err)
		}
	}
	if _, err := newKeyring([][]byte{new}).open(sealed); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("another key opened it: %v", err)
	}
	ring := newKeyring([][]byte{old})
	tampered := map[string][]byte{
		"empty":           nil,
		"short":           sealed[:10],
		"no seal":         msg,
		"body flipped":    flip(sealed, len(sealed)-1),
		"tag flipped":     flip(sealed, len(sealMagic)+3),
		"magic flipped":   flip(sealed, 0),
		"body appended":   append(append([]byte{}, sealed...), 'x'),
		"body cut":        sealed[:len(sealed)-1],
		"tag of another":  append(append([]byte{}, sealed[:len(sealMagic)+sealTag]...), []byte("another message")...),
		"keyless message": newKeyring(nil).seal(msg),
	}
	for name, b := range tampered {
		if _, err := ring.open(b); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: opened (%v)", name, err)
		}
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte{}, b...)
	c[i] ^= 1
	return c
}

// FuzzOpenDecode: whatever arrives, the authenticated decoder refuses it
// or yields a message, without panicking; unsealed input never decodes.
func FuzzOpenDecode(f *testing.F) {
	ring := newKeyring([][]byte{testKey})
	good, _ := Encode(&Message{Kind: KindDelta, Replica: "z", Region: "r"})
	f.Add(ring.seal(good))
	f.Add(good)
	f.Add([]byte(sealMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		body, err := ring.open(b)
		if err != nil {
			return
		}
		if len(b) < len(sealMagic)+sealTag {
			t.Fatal("opened a message shorter than its seal")
		}
		Decode(body)
	})
}

// A relay message is sealed under a key of its own: a gossip payload's
// seal does not open as a relay message, nor the other way round.
func TestRelaySealIsItsOwnPurpose(t *testing.T) {
	ring := newKeyring([][]byte{[]byte("0123456789abcdef0123456789abcdef")})
	msg := []byte("a batch")
	if got, err := ring.forRelay().open(ring.forRelay().seal(msg)); err != nil || string(got) != "a batch" {
		t.Fatalf("relay round trip: %q %v", got, err)
	}
	if _, err := ring.forRelay().open(ring.seal(msg)); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a gossip seal opened as a relay message: %v", err)
	}
	if _, err := ring.open(ring.forRelay().seal(msg)); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a relay seal opened as a gossip message: %v", err)
	}
}
