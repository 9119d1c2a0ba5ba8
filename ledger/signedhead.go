package ledger

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble"
	jsonv2 "github.com/go-json-experiment/json"

	"tally/internal/wire"
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

// SignHead signs the head of replica's chain of poll: seq records, the
// last one hashing to hash. key is the replica's own.
func SignHead(key ed25519.PrivateKey, poll, replica string, seq uint64, hash Hash) SignedHead {
	h := SignedHead{Poll: poll, Replica: replica, Seq: seq, Hash: hash, Pub: key.Public().(ed25519.PublicKey)}
	h.Sig = ed25519.Sign(key, h.message())
	return h
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
	h := SignHead(key, poll, l.replica, count, head)
	return n, WriteSignedHead(w, &h)
}

// WriteSignedHead writes h as an export's signed-head line, after the
// records of its chain (ExportSigned's last line; a buddy's copy's).
func WriteSignedHead(w io.Writer, h *SignedHead) error {
	b, err := jsonv2.Marshal(signedHeadLine{h})
	if err != nil {
		return err
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("ledger: cannot write export: %w", err)
	}
	return nil
}

// SignedHead returns the signed head of replica's chain of poll that
// ImportSigned kept (found false: none).
func (l *Ledger) SignedHead(poll, replica string) (h SignedHead, found bool, err error) {
	v, closer, err := l.db.Get(signedHeadKey(poll, replica))
	if errors.Is(err, pebble.ErrNotFound) {
		return SignedHead{}, false, nil
	}
	if err != nil {
		return SignedHead{}, false, fmt.Errorf("ledger: cannot read a signed head: %w", err)
	}
	defer closer.Close()
	h, err = DecodeSignedHead(v)
	if err == nil && (h.Poll != poll || h.Replica != replica) {
		err = fmt.Errorf("%w: the signed head stored for %s/%s is %s/%s's", ErrMalformed, poll, replica, h.Poll, h.Replica)
	}
	if err != nil {
		return SignedHead{}, false, err
	}
	return h, true, nil
}

// maxSignedHead bounds a signed head's binary form.
const maxSignedHead = 1 + 2*(1+MaxIDLen) + binary.MaxVarintLen64 + len(Hash{}) + ed25519.PublicKeySize + ed25519.SignatureSize

// signedHeadVersion is the first byte of a signed head's binary form.
const signedHeadVersion = 1

// AppendBinary appends the head's binary form (a buddy's copy requests
// and store, the record stream): a version byte, poll, replica, seq, the
// hash, the 32-byte public key and the 64-byte signature.
func (h *SignedHead) AppendBinary(b []byte) []byte {
	b = append(b, signedHeadVersion)
	b = wire.AppendString(b, h.Poll)
	b = wire.AppendString(b, h.Replica)
	b = binary.AppendUvarint(b, h.Seq)
	b = append(b, h.Hash[:]...)
	b = append(b, h.Pub...)
	return append(b, h.Sig...)
}

// DecodeSignedHead decodes AppendBinary's form strictly (canonical
// varints, valid ids, a seq of at least 1, keys and signatures of their
// sizes, nothing after). It does not check the signature: Verify does,
// and whose key it is is the caller's to know.
func DecodeSignedHead(b []byte) (SignedHead, error) {
	var h SignedHead
	d := wire.NewCanonicalReader(b, ErrMalformed)
	if v := d.Byte(); d.Err() == nil && v != signedHeadVersion {
		d.Fail("signed head version %d", v)
	}
	h.Poll = d.String(MaxIDLen, "poll")
	h.Replica = d.String(MaxIDLen, "replica")
	h.Seq = d.Uvarint()
	copy(h.Hash[:], d.Bytes(len(h.Hash)))
	h.Pub = bytes.Clone(d.Bytes(ed25519.PublicKeySize))
	h.Sig = bytes.Clone(d.Bytes(ed25519.SignatureSize))
	if d.Err() == nil && d.Len() != 0 {
		d.Fail("%d bytes after the signed head", d.Len())
	}
	if d.Err() == nil && h.Seq == 0 {
		d.Fail("signed head of no records")
	}
	if d.Err() != nil {
		return SignedHead{}, d.Err()
	}
	if err := ValidID(h.Poll); err != nil {
		return SignedHead{}, fmt.Errorf("%w: signed head poll: %w", ErrMalformed, err)
	}
	if err := ValidID(h.Replica); err != nil {
		return SignedHead{}, fmt.Errorf("%w: signed head replica: %w", ErrMalformed, err)
	}
	return h, nil
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
