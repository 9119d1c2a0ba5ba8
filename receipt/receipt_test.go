package receipt

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func signed(t testing.TB) (Receipt, ed25519.PublicKey) {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf := sha256.Sum256([]byte("a record's canonical encoding"))
	r := Receipt{Poll: "final-vote-2026", VoteID: "ap-southeast-2-3f9c2a10/123456789", Stamp: "1796040005000.12", Leaf: hex.EncodeToString(leaf[:])}
	r.Sign(key)
	return r, pub
}

// A receipt signed by its replica verifies, decodes back to itself, and
// is under 300 bytes with long realistic ids.
func TestReceiptRoundTrip(t *testing.T) {
	r, pub := signed(t)
	if err := r.Verify(pub); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) >= 300 {
		t.Fatalf("a receipt is %d bytes: %s", len(b), b)
	}
	back, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(pub); err != nil || back.Replica() != "ap-southeast-2-3f9c2a10" {
		t.Fatalf("decoded %+v: %v", back, err)
	}
}

// Any field changed, another key, or another kind of signed document
// fails at the signature; a field of the wrong shape fails before it.
func TestReceiptForgeries(t *testing.T) {
	r, pub := signed(t)
	otherPub, _, _ := ed25519.GenerateKey(nil)
	tampered := map[string]func(*Receipt){
		"poll":   func(x *Receipt) { x.Poll = "another-poll" },
		"vote":   func(x *Receipt) { x.VoteID = "ap-southeast-2-3f9c2a10/123456790" },
		"stamp":  func(x *Receipt) { x.Stamp = "1796040005000.13" },
		"leaf":   func(x *Receipt) { x.Leaf = strings.Repeat("0", 64) },
		"sig":    func(x *Receipt) { x.Sig = append([]byte(nil), x.Sig...); x.Sig[0] ^= 1 },
		"signer": func(x *Receipt) { x.VoteID = "eu-west-1/123456789" },
	}
	for what, change := range tampered {
		x := r
		change(&x)
		if err := x.Verify(pub); !errors.Is(err, ErrSignature) {
			t.Errorf("%s changed: %v, want ErrSignature", what, err)
		}
	}
	if err := r.Verify(otherPub); !errors.Is(err, ErrSignature) {
		t.Errorf("another key: %v, want ErrSignature", err)
	}
	if err := r.Verify(nil); !errors.Is(err, ErrSignature) {
		t.Errorf("no key: %v, want ErrSignature", err)
	}
}

// Malformed, truncated, oversized and hostile input: ErrMalformed, with
// the field named.
func TestDecodeRefusesBadInput(t *testing.T) {
	r, _ := signed(t)
	good, _ := json.Marshal(r)
	field := func(name, value string) []byte {
		var m map[string]any
		json.Unmarshal(good, &m)
		var v any
		json.Unmarshal([]byte(value), &v)
		m[name] = v
		b, _ := json.Marshal(m)
		return b
	}
	for what, b := range map[string][]byte{
		"empty":           nil,
		"not json":        []byte("receipt"),
		"truncated":       good[:len(good)/2],
		"an array":        []byte("[" + string(good) + "]"),
		"after":           append(append([]byte{}, good...), '}'),
		"two":             append(append([]byte{}, good...), good...),
		"unknown field":   field("option", `"a"`),
		"oversized":       field("poll", `"`+strings.Repeat("p", 2000)+`"`),
		"poll":            field("poll", `"no spaces"`),
		"vote id":         field("vote_id", `"eu-west-1"`),
		"seq 0":           field("vote_id", `"eu-west-1/0"`),
		"seq +1":          field("vote_id", `"eu-west-1/+1"`),
		"seq 01":          field("vote_id", `"eu-west-1/01"`),
		"stamp":           field("stamp", `"soon"`),
		"stamp negative":  field("stamp", `"-5.1"`),
		"leaf short":      field("leaf", `"abcd"`),
		"leaf upper":      field("leaf", `"`+strings.ToUpper(r.Leaf)+`"`),
		"sig short":       field("sig", `"AAAA"`),
		"sig not base64":  field("sig", `"!!!!"`),
		"null":            []byte("null"),
		"newline in poll": field("poll", `"p\nq"`),
	} {
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", what, err)
		}
	}
}

// Whatever the bytes, Decode answers without panicking, and what it
// accepts is a receipt that encodes and decodes to itself.
func FuzzDecode(f *testing.F) {
	r, _ := signed(f)
	good, _ := json.Marshal(r)
	f.Add(good)
	f.Add([]byte(`{"poll":"p","vote_id":"r/1","stamp":"1.0","leaf":"","sig":""}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("%v is not ErrMalformed", err)
			}
			return
		}
		again, _ := json.Marshal(got)
		back, err := Decode(again)
		if err != nil || back.Poll != got.Poll || back.VoteID != got.VoteID || back.Stamp != got.Stamp || back.Leaf != got.Leaf || string(back.Sig) != string(got.Sig) {
			t.Fatalf("%s decoded to %+v, and again to %+v (%v)", b, got, back, err)
		}
	})
}
