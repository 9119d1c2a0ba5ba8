package ledger

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
)

func signedExport(t *testing.T, n int) (string, ed25519.PrivateKey) {
	t.Helper()
	l := openMem(t, nil, "eu-1")
	for i := range n {
		if _, err := l.Append(vote("p", idem(i), "red", "k"+idem(i), int64(100+i))); err != nil {
			t.Fatal(err)
		}
	}
	_, key, _ := ed25519.GenerateKey(nil)
	var buf bytes.Buffer
	if got, err := l.ExportSigned(&buf, "p", key); err != nil || got != n {
		t.Fatalf("export: %d %v", got, err)
	}
	return buf.String(), key
}

func TestSignedHeads(t *testing.T) {
	exp, key := signedExport(t, 3)
	lines := strings.SplitAfter(strings.TrimSuffix(exp, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[3], `{"signed_head":`) {
		t.Fatalf("export: %q", exp)
	}
	var heads []*SignedHead
	if _, err := VerifyChains(ReadNDJSONHeads(strings.NewReader(exp), func(h *SignedHead) { heads = append(heads, h) })); err != nil {
		t.Fatal(err)
	}
	if len(heads) != 1 || heads[0].Seq != 3 || !bytes.Equal(heads[0].Pub, key.Public().(ed25519.PublicKey)) || heads[0].KeyID() == "" {
		t.Fatalf("heads: %+v", heads)
	}
	head := lines[3]
	_, stranger, _ := ed25519.GenerateKey(nil)
	other, _ := func() (string, error) {
		l := openMem(t, nil, "eu-1")
		for i := range 3 {
			l.Append(vote("p", idem(i), "red", "k"+idem(i), int64(100+i)))
		}
		var b bytes.Buffer
		_, err := l.ExportSigned(&b, "p", stranger)
		return b.String(), err
	}()
	otherHead := strings.SplitAfter(strings.TrimSuffix(other, "\n"), "\n")[3]
	for name, in := range map[string]string{
		"seq changed":                         lines[0] + lines[1] + lines[2] + strings.Replace(head, `"seq":3`, `"seq":2`, 1),
		"head before a record":                lines[0] + lines[1] + head + lines[2],
		"head of fewer records":               lines[0] + lines[1] + strings.Replace(head, `"seq":3`, `"seq":2`, 1),
		"record after the head":               exp + lines[0],
		"signature flipped":                   lines[0] + lines[1] + lines[2] + strings.Replace(head, `"sig":"`, `"sig":"A`, 1),
		"unknown member":                      lines[0] + lines[1] + lines[2] + strings.Replace(head, `{"signed_head":{`, `{"signed_head":{"x":1,`, 1),
		"another key's head on other records": lines[0] + lines[1] + lines[2] + strings.Replace(otherHead, `"hash":"`, `"hash":"0`, 1),
	} {
		if _, err := VerifyChains(ReadNDJSONHeads(strings.NewReader(in), nil)); !errors.Is(err, ErrChain) && !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The same records with another key's valid head verify, and name that
	// key: the auditor compares key ids with the replica's announced key.
	var got string
	if _, err := VerifyChains(ReadNDJSONHeads(strings.NewReader(lines[0]+lines[1]+lines[2]+otherHead), func(h *SignedHead) { got = h.KeyID() })); err != nil {
		t.Fatal(err)
	}
	if got == heads[0].KeyID() {
		t.Fatal("two keys share a key id")
	}
	// Unsigned exports still read.
	if _, err := VerifyChains(ReadNDJSON(strings.NewReader(lines[0] + lines[1] + lines[2]))); err != nil {
		t.Fatal(err)
	}
}
