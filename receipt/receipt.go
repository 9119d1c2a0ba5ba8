package receipt

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"tally/ids"
)

// Receipt is one acknowledged vote's evidence.
type Receipt struct {
	Poll   string `json:"poll"`
	VoteID string `json:"vote_id"` // REPLICA/SEQ: the replica that ledgered it, and signed this
	Stamp  string `json:"stamp"`   // WALL.LOGICAL, as the answer gave it
	Leaf   string `json:"leaf"`    // the record's hash, 64 hex digits
	Sig    []byte `json:"sig"`     // Ed25519 over SigningBytes, base64 in JSON
}

// MaxJSON bounds an encoded receipt a decoder reads.
const MaxJSON = 1024

// Errors, each naming the step that failed.
var (
	ErrMalformed = errors.New("receipt: malformed")
	ErrSignature = errors.New("receipt: signature")
)

// Replica is the replica that ledgered the vote: the vote id's prefix.
func (r Receipt) Replica() string {
	replica, _, _ := strings.Cut(r.VoteID, "/")
	return replica
}

// Check validates the receipt's fields (not its signature).
func (r Receipt) Check() error {
	if err := ids.Valid(r.Poll); err != nil {
		return fmt.Errorf("%w: poll: %v", ErrMalformed, err)
	}
	replica, seq, ok := strings.Cut(r.VoteID, "/")
	if !ok || ids.Valid(replica) != nil {
		return fmt.Errorf("%w: vote_id %q: want REPLICA/SEQ", ErrMalformed, r.VoteID)
	}
	if n, err := strconv.ParseUint(seq, 10, 64); err != nil || n == 0 || strconv.FormatUint(n, 10) != seq {
		return fmt.Errorf("%w: vote_id %q: the sequence must be a number from 1, written plainly", ErrMalformed, r.VoteID)
	}
	wall, logical, ok := strings.Cut(r.Stamp, ".")
	if w, err := strconv.ParseInt(wall, 10, 64); !ok || err != nil || w <= 0 || strconv.FormatInt(w, 10) != wall {
		return fmt.Errorf("%w: stamp %q: want WALL.LOGICAL", ErrMalformed, r.Stamp)
	}
	if l, err := strconv.ParseUint(logical, 10, 32); err != nil || strconv.FormatUint(l, 10) != logical {
		return fmt.Errorf("%w: stamp %q: want WALL.LOGICAL", ErrMalformed, r.Stamp)
	}
	if b, err := hex.DecodeString(r.Leaf); err != nil || len(b) != 32 || hex.EncodeToString(b) != r.Leaf {
		return fmt.Errorf("%w: leaf: want 64 lowercase hex digits", ErrMalformed)
	}
	if len(r.Sig) != ed25519.SignatureSize {
		return fmt.Errorf("%w: sig: want %d bytes, got %d", ErrMalformed, ed25519.SignatureSize, len(r.Sig))
	}
	return nil
}

// SigningBytes are what the replica signs: a domain line, then the
// fields one a line (none can hold a newline: Check).
func (r Receipt) SigningBytes() []byte {
	return []byte("tally receipt v1\n" + r.Poll + "\n" + r.VoteID + "\n" + r.Stamp + "\n" + r.Leaf + "\n")
}

// Sign fills in the signature with the replica's key.
func (r *Receipt) Sign(key ed25519.PrivateKey) {
	r.Sig = ed25519.Sign(key, r.SigningBytes())
}

// Verify checks the fields and the signature with the public key of the
// replica the vote id names (the caller looks it up: GET /v1/cluster/keys).
func (r Receipt) Verify(pub ed25519.PublicKey) error {
	if err := r.Check(); err != nil {
		return err
	}
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, r.SigningBytes(), r.Sig) {
		return fmt.Errorf("%w: not signed by %s's key", ErrSignature, r.Replica())
	}
	return nil
}

// Decode reads one receipt in JSON, strictly: no unknown fields, nothing
// after it, at most MaxJSON bytes, every field checked.
func Decode(b []byte) (Receipt, error) {
	if len(b) > MaxJSON {
		return Receipt{}, fmt.Errorf("%w: %d bytes, over %d", ErrMalformed, len(b), MaxJSON)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r Receipt
	if err := dec.Decode(&r); err != nil {
		return Receipt{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
		return Receipt{}, fmt.Errorf("%w: data after the receipt", ErrMalformed)
	}
	if err := strictly(b[:dec.InputOffset()], receiptFields); err != nil {
		return Receipt{}, err
	}
	if err := r.Check(); err != nil {
		return Receipt{}, err
	}
	return r, nil
}

// AppendJSON appends the receipt as encoding/json writes it (fields in
// order, the signature in standard base64): an answer to every vote
// carries one, so it is appended, not marshalled by reflection. A field
// that needs escaping (none that Check accepts) goes through
// encoding/json.
func (r Receipt) AppendJSON(b []byte) []byte {
	for _, s := range [...]string{r.Poll, r.VoteID, r.Stamp, r.Leaf} {
		if !plainJSON(s) {
			out, _ := json.Marshal(r) // strings and bytes: it cannot fail
			return append(b, out...)
		}
	}
	b = append(b, `{"poll":"`...)
	b = append(b, r.Poll...)
	b = append(b, `","vote_id":"`...)
	b = append(b, r.VoteID...)
	b = append(b, `","stamp":"`...)
	b = append(b, r.Stamp...)
	b = append(b, `","leaf":"`...)
	b = append(b, r.Leaf...)
	b = append(b, `","sig":`...)
	if r.Sig == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, r.Sig)
		b = append(b, '"')
	}
	return append(b, '}')
}

// plainJSON reports whether s is written as it is inside a JSON string
// by encoding/json: printable ASCII but for the quote, the backslash and
// the HTML characters it escapes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
