package ledger

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"

	jsonv2 "github.com/go-json-experiment/json"
)

// SignedHead is a replica's signature over the head of its chain for one
// poll: the last line of the replica's records in an export. With it an
// auditor can tell which key (which replica) vouches for which records;
// without the replica's private key no one can extend or rewrite the
// chain under its name.
type SignedHead struct {
	Poll    string `json:"poll"`
	Replica string `json:"replica"`
	Seq     uint64 `json:"seq"`  // records in the chain
	Hash    Hash   `json:"hash"` // hash of the last record
	Pub     []byte `json:"pub"`  // Ed25519 public key
	Sig     []byte `json:"sig"`
}

// signedHeadLine is the export line holding a SignedHead.
type signedHeadLine struct {
	SignedHead *SignedHead `json:"signed_head"`
}

var signedHeadPrefix = []byte(`{"signed_head":`)

func (h *SignedHead) message() []byte {
	var b bytes.Buffer
	b.WriteString("tally chain head v1\n")
	b.WriteString(h.Poll)
	b.WriteByte(0)
	b.WriteString(h.Replica)
	b.WriteByte(0)
	b.Write(binary.BigEndian.AppendUint64(nil, h.Seq))
	b.Write(h.Hash[:])
	return b.Bytes()
}

// Verify checks the signature with the key the head carries.
func (h *SignedHead) Verify() bool {
	return len(h.Pub) == ed25519.PublicKeySize && ed25519.Verify(h.Pub, h.message(), h.Sig)
}

// KeyID is a short, stable name of the signing key (hex of its SHA-256's
// first 8 bytes), for people comparing keys.
func (h *SignedHead) KeyID() string {
	s := sha256.Sum256(h.Pub)
	return hex.EncodeToString(s[:8])
}

// ExportSigned writes one poll's records as NDJSON, like Export, then a
// signed head of this replica's own chain (when it has records there).
func (l *Ledger) ExportSigned(w io.Writer, poll string, key ed25519.PrivateKey) (int, error) {
	n, err := l.Export(w, poll)
	if err != nil || key == nil || l.replica == "" {
		return n, err
	}
	count, head, err := l.Head(poll, l.replica)
	if err != nil || count == 0 {
		return n, err
	}
	h := SignedHead{Poll: poll, Replica: l.replica, Seq: count, Hash: head, Pub: key.Public().(ed25519.PublicKey)}
	h.Sig = ed25519.Sign(key, h.message())
	b, err := jsonv2.Marshal(signedHeadLine{&h})
	if err != nil {
		return n, err
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return n, fmt.Errorf("ledger: cannot write export: %w", err)
	}
	return n, nil
}

// decodeSignedHead decodes a signed-head line strictly and checks it
// against the chain read so far: the signature verifies, and the head is
// the chain's last record.
func decodeSignedHead(line []byte, chains *Verifier) (*SignedHead, error) {
	var l signedHeadLine
	if err := jsonv2.Unmarshal(line, &l, jsonv2.RejectUnknownMembers(true), jsonv2.MatchCaseInsensitiveNames(false)); err != nil || l.SignedHead == nil {
		return nil, fmt.Errorf("%w: signed head: %v", ErrMalformed, err)
	}
	h := l.SignedHead
	if !h.Verify() {
		return nil, fmt.Errorf("%w: the signed head of %s/%s does not verify", ErrChain, h.Poll, h.Replica)
	}
	c, ok := chains.chains[chainID{poll: h.Poll, replica: h.Replica}]
	if !ok || c.Records != h.Seq || c.Head != h.Hash {
		return nil, fmt.Errorf("%w: the signed head of %s/%s (seq %d) is not the head of the records before it", ErrChain, h.Poll, h.Replica, h.Seq)
	}
	return h, nil
}
