package state

import (
	"crypto/ed25519"
	"testing"

	"tally/hlc"
)

func TestCertificateSignatures(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	other, _, _ := ed25519.GenerateKey(nil)
	c := Certificate{Poll: "p", Status: Reconciled, TS: hlc.Timestamp{Wall: 5, Replica: "eu-1"}, By: "eu-1",
		Totals: map[string]uint64{"a": 3, "b": 1}, Total: 4, Digest: "abc", Detail: []byte(`{"x":1}`)}
	c.Sig = ed25519.Sign(priv, c.SigningBytes())
	if !c.VerifySignature(pub) {
		t.Fatal("a good signature does not verify")
	}
	if c.VerifySignature(other) || c.VerifySignature(nil) {
		t.Fatal("verified with another key")
	}
	for name, tamper := range map[string]func(*Certificate){
		"totals":  func(c *Certificate) { c.Totals = map[string]uint64{"a": 1, "b": 3} },
		"total":   func(c *Certificate) { c.Total = 999999 },
		"digest":  func(c *Certificate) { c.Digest = "deadbeef" },
		"by":      func(c *Certificate) { c.By = "us-1" },
		"status":  func(c *Certificate) { c.Status = Pending },
		"stamp":   func(c *Certificate) { c.TS.Wall++ },
		"detail":  func(c *Certificate) { c.Detail = []byte(`{"x":2}`) },
		"no sig":  func(c *Certificate) { c.Sig = nil },
		"sig cut": func(c *Certificate) { c.Sig = c.Sig[:10] },
	} {
		d := c
		d.Totals = map[string]uint64{"a": 3, "b": 1}
		tamper(&d)
		if d.VerifySignature(pub) {
			t.Errorf("%s tampered: still verifies", name)
		}
	}
}

func TestLearnKeyKeepsTheFirst(t *testing.T) {
	store := &memStore{}
	s, _ := New(Config{Replica: "eu-1", Store: store})
	a, _, _ := ed25519.GenerateKey(nil)
	b, _, _ := ed25519.GenerateKey(nil)
	if err := s.Defs.LearnKey("us-1", a); err != nil {
		t.Fatal(err)
	}
	if err := s.Defs.LearnKey("us-1", a); err != nil {
		t.Fatalf("the same key again: %v", err)
	}
	if err := s.Defs.LearnKey("us-1", b); err == nil {
		t.Fatal("another key for a known replica was taken")
	}
	if err := s.Defs.LearnKey("us-2", a[:5]); err == nil {
		t.Fatal("a short key was taken")
	}
	again, _ := New(Config{Replica: "eu-1", Store: store})
	if k, ok := again.Defs.PublicKey("us-1"); !ok || !k.Equal(a) {
		t.Fatal("keys do not survive a reload")
	}
}
