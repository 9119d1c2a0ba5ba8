package receipt

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"tally/ids"
)

// TreeHead is a certified poll's signed tree head: the size and root of
// the Merkle tree (package merkle) over the leaves of every record the
// certificate was computed from, in the certificate's order (each
// replica's chain by replica id, each chain by seq), with the result's
// digest, signed by the certifying replica. It is written inside the
// reconciled certificate's detail (so the certificate's signature covers
// it too) and travels alone in a proof: a voter checks their vote's
// place in the result without the certificate's other contents (a quiz
// question's hold the participants' voter ids).
type TreeHead struct {
	Poll   string `json:"poll"`
	Size   uint64 `json:"size"`   // records in the tree: the result's records
	Root   string `json:"root"`   // 64 lowercase hex digits
	Digest string `json:"digest"` // the certificate's result digest
	By     string `json:"by"`     // the certifying replica: whose key signed
	Sig    []byte `json:"sig"`    // Ed25519 over SigningBytes, base64 in JSON
}

// ErrCertificate is a tree head that is malformed or not signed by the
// replica it names: the step of a proof's check that the certificate's
// signature failed.
var ErrCertificate = errors.New("receipt: certificate")

// SigningBytes are what the certifier signs: a domain line, then the
// fields one a line.
func (h TreeHead) SigningBytes() []byte {
	return []byte("tally tree head v1\n" + h.Poll + "\n" + strconv.FormatUint(h.Size, 10) + "\n" + h.Root + "\n" + h.Digest + "\n" + h.By + "\n")
}

// Sign fills in the signature with the certifier's key.
func (h *TreeHead) Sign(key ed25519.PrivateKey) {
	h.Sig = ed25519.Sign(key, h.SigningBytes())
}

// Check validates the tree head's fields (not its signature).
func (h TreeHead) Check() error {
	if err := ids.Valid(h.Poll); err != nil {
		return fmt.Errorf("%w: poll: %v", ErrCertificate, err)
	}
	if err := ids.Valid(h.By); err != nil {
		return fmt.Errorf("%w: by: %v", ErrCertificate, err)
	}
	if !isHash(h.Root) {
		return fmt.Errorf("%w: root: want 64 lowercase hex digits", ErrCertificate)
	}
	if !isHash(h.Digest) {
		return fmt.Errorf("%w: digest: want 64 lowercase hex digits", ErrCertificate)
	}
	if len(h.Sig) != ed25519.SignatureSize {
		return fmt.Errorf("%w: sig: want %d bytes, got %d", ErrCertificate, ed25519.SignatureSize, len(h.Sig))
	}
	return nil
}

// Verify checks the fields and the signature with the certifying
// replica's public key (the caller looks it up by By).
func (h TreeHead) Verify(pub ed25519.PublicKey) error {
	if err := h.Check(); err != nil {
		return err
	}
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, h.SigningBytes(), h.Sig) {
		return fmt.Errorf("%w: the tree head is not signed by %s's key", ErrCertificate, h.By)
	}
	return nil
}

// RootHash is Root decoded (zero when malformed: Check first).
func (h TreeHead) RootHash() [32]byte {
	var out [32]byte
	hex.Decode(out[:], []byte(h.Root))
	return out
}

// isHash reports whether s is 64 lowercase hex digits.
func isHash(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32 && hex.EncodeToString(b) == s
}
