package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"tally/ledger"
	"tally/merkle"
)

// Dispositions of a record under the certified rule (docs/auditing.md,
// "Receipts"): what became of the vote the receipt is for.
const (
	Counted    = "counted"    // the voter's vote in the result
	Superseded = "superseded" // a later vote of the same voter counts instead (Proof.Counted)
	Late       = "late"       // it arrived after the close, within the grace: ledgered, not counted
	Duplicate  = "duplicate"  // a retry: an earlier record of its idempotency key stands
	Filtered   = "filtered"   // below the trust floor: not counted (docs/defences.md)
)

// DispositionCode is a disposition's byte in its record's leaf of the
// certificate's tree (merkle.Leaf: the record's hash, then this byte; the
// values of ledger.Disposition): the root commits to what became of
// every record, so a proof cannot say "counted" of a vote that is not.
// 0 for a word that is none.
func DispositionCode(word string) byte {
	switch word {
	case Counted:
		return 1
	case Superseded:
		return 2
	case Late:
		return 3
	case Filtered:
		return 4
	case Duplicate:
		return 5
	}
	return 0
}

// Proof is the body of GET /v1/polls/{poll}/proofs/{leaf}: a record of a
// certified poll, its place in the certificate's Merkle tree, what became
// of it, and the signed tree head. Siblings on the path are hashes only:
// a proof shows no other voter's option or id.
type Proof struct {
	Leaf   string   `json:"leaf"`   // the record's hash, 64 hex digits: the receipt's leaf
	Index  uint64   `json:"index"`  // its place in the tree
	Path   []string `json:"path"`   // the audit path (RFC 9162 §2.1.3), hex, leaf to root
	Record []byte   `json:"record"` // its canonical encoding (base64), which hashes to Leaf
	Vote   Vote     `json:"vote"`   // what Record says, for reading (checked against it)
	// Disposition is what became of it (Counted, Superseded, …).
	Disposition string `json:"disposition"`
	// Counted is, for a superseded record, the proof of the same voter's
	// record that counts; for a duplicate, of the record of its key that
	// stands, when it is the same voter's. Nil otherwise.
	Counted *Proof `json:"counted,omitempty"`
	// TreeHead is the certificate's signed tree head (on the outer proof).
	TreeHead *TreeHead `json:"tree_head,omitempty"`
}

// Vote is a record's fields a voter reads.
type Vote struct {
	VoteID string `json:"vote_id"`
	Voter  string `json:"voter"`
	Option string `json:"option"`
	Stamp  string `json:"stamp"` // WALL.LOGICAL
}

// VoteOf is a record's Vote.
func VoteOf(r *ledger.Record) Vote {
	return Vote{VoteID: r.ID().String(), Voter: r.Voter, Option: r.Option, Stamp: stamp(r.Wall, r.Logical)}
}

func stamp(wall int64, logical uint32) string {
	return fmt.Sprintf("%d.%d", wall, logical)
}

// MaxProofJSON bounds an encoded proof a decoder reads: two records and
// two paths of 64 hashes fit with room to spare.
const MaxProofJSON = 64 << 10

// maxPath is the longest audit path: a tree of 2^64 leaves.
const maxPath = 64

// Errors of a proof's check, each naming the step that failed (with
// ErrSignature, the receipt's, and ErrCertificate, the tree head's).
var (
	ErrRecord = errors.New("receipt: record") // the proof's record is not the receipt's vote
	ErrPath   = errors.New("receipt: path")   // the audit path is malformed or leads nowhere
	ErrRoot   = errors.New("receipt: root")   // the path leads to another root than the certificate's
)

// Verdict is what a proof's check established.
type Verdict struct {
	Disposition string
	Vote        Vote  // the receipt's vote, from its record
	Counted     *Vote // the voter's counted vote, for a superseded one
	Size        uint64
	Root        string
	By          string // the certifying replica
}

// Keys looks up a replica's public key (GET /v1/cluster/keys); nil: not
// known.
type Keys func(replica string) ed25519.PublicKey

// Verify checks a receipt against a proof of its poll, step by step: the
// receipt's signature by the replica that ledgered the vote, the tree
// head's signature by the certifier, the record (it hashes to the
// receipt's leaf and is the receipt's vote), the audit path to the tree
// head's root, and, for a superseded vote, the same for the voter's
// counted one. The error names the step that failed.
func Verify(r Receipt, p Proof, keys Keys) (Verdict, error) {
	if keys == nil {
		keys = func(string) ed25519.PublicKey { return nil }
	}
	if err := r.Verify(keys(r.Replica())); err != nil {
		return Verdict{}, err
	}
	h := p.TreeHead
	if h == nil {
		return Verdict{}, fmt.Errorf("%w: the proof carries no tree head", ErrCertificate)
	}
	if err := h.Verify(keys(h.By)); err != nil {
		return Verdict{}, err
	}
	if h.Poll != r.Poll {
		return Verdict{}, fmt.Errorf("%w: the tree head is poll %q's, the receipt poll %q's", ErrCertificate, h.Poll, r.Poll)
	}
	if p.Leaf != r.Leaf {
		return Verdict{}, fmt.Errorf("%w: the proof is for leaf %s, the receipt for %s", ErrRecord, p.Leaf, r.Leaf)
	}
	rec, err := checkProof(p, h)
	if err != nil {
		return Verdict{}, err
	}
	if got := VoteOf(&rec); got.VoteID != r.VoteID || got.Stamp != r.Stamp {
		return Verdict{}, fmt.Errorf("%w: the record is vote %s stamped %s, the receipt's %s stamped %s", ErrRecord, got.VoteID, got.Stamp, r.VoteID, r.Stamp)
	}
	v := Verdict{Disposition: p.Disposition, Vote: p.Vote, Size: h.Size, Root: h.Root, By: h.By}
	switch p.Disposition {
	case Counted, Late, Filtered:
		if p.Counted != nil {
			return Verdict{}, fmt.Errorf("%w: a %s record points at another", ErrRecord, p.Disposition)
		}
	case Superseded, Duplicate:
		c := p.Counted
		if c == nil {
			if p.Disposition == Superseded {
				return Verdict{}, fmt.Errorf("%w: a superseded record without the voter's counted one", ErrRecord)
			}
			break
		}
		if c.Counted != nil || c.TreeHead != nil {
			return Verdict{}, fmt.Errorf("%w: the counted record's proof nests further", ErrRecord)
		}
		if c.Leaf == p.Leaf || c.Index == p.Index {
			return Verdict{}, fmt.Errorf("%w: the record said to count instead is the record itself", ErrRecord)
		}
		other, err := checkProof(*c, h)
		if err != nil {
			return Verdict{}, fmt.Errorf("the voter's counted vote: %w", err)
		}
		switch {
		case other.Voter != rec.Voter:
			return Verdict{}, fmt.Errorf("%w: the counted record is another voter's", ErrRecord)
		case p.Disposition == Superseded && c.Disposition != Counted:
			return Verdict{}, fmt.Errorf("%w: the record said to count instead is %s", ErrRecord, c.Disposition)
		case p.Disposition == Duplicate && (other.Idem != rec.Idem || c.Disposition == Duplicate):
			return Verdict{}, fmt.Errorf("%w: the record said to stand for the key has another key, or does not stand", ErrRecord)
		}
		v.Counted = &c.Vote
	default:
		return Verdict{}, fmt.Errorf("%w: unknown disposition %q", ErrRecord, p.Disposition)
	}
	return v, nil
}

// checkProof checks one record's proof against the tree head: its record
// hashes to its leaf and says what its Vote says, and its path leads
// from the leaf (the record's hash and its disposition) to the head's
// root. It returns the record.
func checkProof(p Proof, h *TreeHead) (ledger.Record, error) {
	sum := sha256.Sum256(p.Record)
	if !isHash(p.Leaf) || hex.EncodeToString(sum[:]) != p.Leaf {
		return ledger.Record{}, fmt.Errorf("%w: the record does not hash to the leaf %s", ErrRecord, p.Leaf)
	}
	rec, err := ledger.DecodeRecord(p.Record)
	if err != nil {
		return ledger.Record{}, fmt.Errorf("%w: %v", ErrRecord, err)
	}
	if rec.Poll != h.Poll {
		return ledger.Record{}, fmt.Errorf("%w: the record is poll %q's", ErrRecord, rec.Poll)
	}
	if VoteOf(&rec) != p.Vote {
		return ledger.Record{}, fmt.Errorf("%w: the proof's vote %+v is not its record's %+v", ErrRecord, p.Vote, VoteOf(&rec))
	}
	if len(p.Path) > maxPath {
		return ledger.Record{}, fmt.Errorf("%w: %d hashes", ErrPath, len(p.Path))
	}
	path := make([]merkle.Hash, len(p.Path))
	for i, s := range p.Path {
		if !isHash(s) {
			return ledger.Record{}, fmt.Errorf("%w: hash %d is not 64 lowercase hex digits", ErrPath, i)
		}
		hex.Decode(path[i][:], []byte(s))
	}
	if p.Index >= h.Size {
		return ledger.Record{}, fmt.Errorf("%w: leaf %d of a tree of %d", ErrPath, p.Index, h.Size)
	}
	code := DispositionCode(p.Disposition)
	if code == 0 {
		return ledger.Record{}, fmt.Errorf("%w: unknown disposition %q", ErrRecord, p.Disposition)
	}
	if err := merkle.VerifyInclusion(merkle.LeafOf(sum, code), p.Index, h.Size, path, h.RootHash()); err != nil {
		if errors.Is(err, merkle.ErrRootMismatch) {
			return ledger.Record{}, fmt.Errorf("%w: the path from leaf %d leads to another root than the certificate's %s", ErrRoot, p.Index, h.Root)
		}
		return ledger.Record{}, fmt.Errorf("%w: %v", ErrPath, err)
	}
	return rec, nil
}

// DecodeProof reads one proof in JSON, strictly: no unknown fields,
// nothing after it, at most MaxProofJSON bytes, the leaves, the paths'
// hashes and the dispositions well formed (Verify checks what they
// prove).
func DecodeProof(b []byte) (Proof, error) {
	if len(b) > MaxProofJSON {
		return Proof{}, fmt.Errorf("%w: a proof of %d bytes, over %d", ErrMalformed, len(b), MaxProofJSON)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p Proof
	if err := dec.Decode(&p); err != nil {
		return Proof{}, fmt.Errorf("%w: proof: %v", ErrMalformed, err)
	}
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
		return Proof{}, fmt.Errorf("%w: data after the proof", ErrMalformed)
	}
	if err := strictly(b[:dec.InputOffset()], proofFields); err != nil {
		return Proof{}, err
	}
	for q, depth := &p, 0; q != nil; q, depth = q.Counted, depth+1 {
		if err := q.shape(depth); err != nil {
			return Proof{}, err
		}
	}
	return p, nil
}

// shape checks one proof's fields (depth 0: the outer proof, 1: its
// counted one, which nests no further).
func (p *Proof) shape(depth int) error {
	switch {
	case depth > 1:
		return fmt.Errorf("%w: proofs nested %d deep", ErrMalformed, depth)
	case !isHash(p.Leaf):
		return fmt.Errorf("%w: leaf: want 64 lowercase hex digits", ErrMalformed)
	case len(p.Record) == 0:
		return fmt.Errorf("%w: no record", ErrMalformed)
	case len(p.Path) > maxPath:
		return fmt.Errorf("%w: a path of %d hashes", ErrMalformed, len(p.Path))
	case depth == 0 && p.TreeHead == nil:
		return fmt.Errorf("%w: no tree head", ErrMalformed)
	}
	switch p.Disposition {
	case Counted, Superseded, Late, Duplicate, Filtered:
	default:
		return fmt.Errorf("%w: disposition %q", ErrMalformed, p.Disposition)
	}
	for i, h := range p.Path {
		if !isHash(h) {
			return fmt.Errorf("%w: path hash %d: want 64 lowercase hex digits", ErrMalformed, i)
		}
	}
	return nil
}
