package ledger

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"

	"tally/hlc"
)

// Certificate statuses.
const (
	Pending    = "pending"    // certification tried and not complete: Reason says why
	Reconciled = "reconciled" // the exact result
)

// Certificate is what a poll's certification produced, as replicated to
// every region (package state keeps one per poll): a reconciled certificate
// beats any pending one and, once held, is final (of two reconciled ones
// the earlier stands: both are the same pure function of the ledgers
// unless an operator excluded a replica, and then the first decision
// holds); of two pending ones the newer stands.
type Certificate struct {
	Poll   string            `json:"poll"`
	Status string            `json:"status"`
	TS     hlc.Timestamp     `json:"ts"` // when it was decided, by the certifier's clock
	By     string            `json:"by"` // the certifying replica
	Totals map[string]uint64 `json:"totals,omitempty"`
	Total  uint64            `json:"total,omitempty"`
	Digest string            `json:"digest,omitempty"`
	Reason string            `json:"reason,omitempty"`
	// Detail is the certifier's full account (the result, or what is
	// missing), kept as it was written.
	Detail json.RawMessage `json:"detail,omitempty"`
	// Sig is the certifying replica's Ed25519 signature over SigningBytes;
	// receivers check it against the key that replica announced.
	Sig []byte `json:"sig,omitempty"`
}

// SigningBytes is what a certificate's signature covers: every field but
// the signature, in a fixed encoding.
func (c Certificate) SigningBytes() []byte {
	c.Sig = nil
	b, _ := json.Marshal(c) // struct fields in order, map keys sorted: deterministic
	return append([]byte("tally certificate v1\n"), b...)
}

// VerifySignature reports whether the certificate carries a valid
// signature by pub.
func (c *Certificate) VerifySignature(pub ed25519.PublicKey) bool {
	return len(pub) == ed25519.PublicKeySize && len(c.Sig) == ed25519.SignatureSize && ed25519.Verify(pub, c.SigningBytes(), c.Sig)
}

// Validate checks a certificate's shape (as received from another node).
func (c *Certificate) Validate() error {
	switch {
	case c.Poll == "" || c.TS.Wall <= 0 || c.By == "":
		return fmt.Errorf("certificate: poll, ts and by are required")
	case c.Status == Reconciled && c.Digest == "":
		return fmt.Errorf("certificate: a reconciled certificate needs a digest")
	case c.Status != Reconciled && c.Status != Pending:
		return fmt.Errorf("certificate: unknown status %q", c.Status)
	}
	return nil
}
