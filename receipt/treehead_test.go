package receipt

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// signedHead is the fixture poll's tree head, and its certifier's key.
func signedHead(t *testing.T) (TreeHead, ed25519.PublicKey) {
	t.Helper()
	s := newFixtureSetup(t)
	return s.poll.head, s.lookup("eu-1")
}

// A signed tree head verifies, goes through JSON unchanged and still
// verifies; RootHash is its root decoded.
func TestTreeHeadRoundTrip(t *testing.T) {
	h, pub := signedHead(t)
	if err := h.Verify(pub); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var back TreeHead
	if err := dec.Decode(&back); err != nil || !reflect.DeepEqual(back, h) {
		t.Fatalf("decoded %+v (%v), want %+v", back, err, h)
	}
	if err := back.Verify(pub); err != nil {
		t.Fatal(err)
	}
	root := h.RootHash()
	if got := hex.EncodeToString(root[:]); got != h.Root {
		t.Fatalf("RootHash %s, root %s", got, h.Root)
	}
	if (TreeHead{Root: "not hex"}).RootHash() != [32]byte{} {
		t.Fatal("a malformed root decodes to something")
	}
}

// A tree head of the wrong shape fails Check, and so Verify, at the
// certificate, the field named.
func TestTreeHeadCheck(t *testing.T) {
	h, pub := signedHead(t)
	for _, c := range []struct {
		field  string
		change func(*TreeHead)
	}{
		{"poll", func(x *TreeHead) { x.Poll = "" }},
		{"poll", func(x *TreeHead) { x.Poll = "a poll" }},
		{"by", func(x *TreeHead) { x.By = "" }},
		{"by", func(x *TreeHead) { x.By = "eu-1\nus-1" }},
		{"root", func(x *TreeHead) { x.Root = "" }},
		{"root", func(x *TreeHead) { x.Root = strings.ToUpper(x.Root) }},
		{"root", func(x *TreeHead) { x.Root = x.Root[:62] }},
		{"root", func(x *TreeHead) { x.Root += "00" }},
		{"digest", func(x *TreeHead) { x.Digest = "sha256:" + x.Digest[7:] }},
		{"digest", func(x *TreeHead) { x.Digest = "" }},
		{"sig", func(x *TreeHead) { x.Sig = x.Sig[:63] }},
		{"sig", func(x *TreeHead) { x.Sig = nil }},
	} {
		x := h
		c.change(&x)
		err := x.Check()
		if !errors.Is(err, ErrCertificate) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s changed to %+v: Check says %v, want ErrCertificate naming %s", c.field, x, err, c.field)
		}
		if err := x.Verify(pub); !errors.Is(err, ErrCertificate) {
			t.Errorf("%s changed: Verify says %v", c.field, err)
		}
	}
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
}

// Any field changed after signing, another replica's key (even a known
// one), no key, or a receipt's signature in place of a tree head's fails
// at the certificate.
func TestTreeHeadSignature(t *testing.T) {
	h, pub := signedHead(t)
	tampered := map[string]func(*TreeHead){
		"poll":   func(x *TreeHead) { x.Poll = "another-poll" },
		"size":   func(x *TreeHead) { x.Size++ },
		"root":   func(x *TreeHead) { x.Root = flipHex(x.Root) },
		"digest": func(x *TreeHead) { x.Digest = flipHex(x.Digest) },
		"by":     func(x *TreeHead) { x.By = "us-1" },
		"sig":    func(x *TreeHead) { x.Sig = bytes.Clone(x.Sig); x.Sig[10] ^= 4 },
	}
	for what, change := range tampered {
		x := h
		change(&x)
		if err := x.Verify(pub); !errors.Is(err, ErrCertificate) {
			t.Errorf("%s changed: %v, want ErrCertificate", what, err)
		}
	}
	other := testKey("ap-1")
	resigned := h
	resigned.Sign(other)
	if err := resigned.Verify(pub); !errors.Is(err, ErrCertificate) {
		t.Errorf("signed by ap-1, checked with eu-1's key: %v", err)
	}
	if err := resigned.Verify(other.Public().(ed25519.PublicKey)); err != nil {
		t.Errorf("signed by ap-1, checked with its key: %v", err)
	}
	if err := h.Verify(nil); !errors.Is(err, ErrCertificate) {
		t.Errorf("no key: %v", err)
	}
	if err := h.Verify(pub[:16]); !errors.Is(err, ErrCertificate) {
		t.Errorf("a short key: %v", err)
	}
	// Domain separation: a receipt and a tree head never sign the same bytes.
	r := Receipt{Poll: h.Poll, VoteID: "eu-1/1", Stamp: "1.0", Leaf: h.Root}
	if bytes.Equal(r.SigningBytes(), h.SigningBytes()) || !bytes.HasPrefix(h.SigningBytes(), []byte("tally tree head v1\n")) {
		t.Fatalf("signing bytes %q", h.SigningBytes())
	}
}
