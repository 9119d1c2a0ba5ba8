package ledger

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
)

// Chain summarises one replica's verified chain for one poll.
type Chain struct {
	Poll    string `json:"poll"`
	Replica string `json:"replica"`
	Records uint64 `json:"records"`
	Head    Hash   `json:"head"` // hash of the last record
}

// Verifier checks hash chains record by record. Each chain's records must
// come in sequence order starting at 1 (the order Export writes); chains
// may interleave.
type Verifier struct {
	chains map[chainID]*Chain
}

// NewVerifier returns an empty verifier.
func NewVerifier() *Verifier { return &Verifier{chains: make(map[chainID]*Chain)} }

// Add checks that r continues its chain.
func (v *Verifier) Add(r *Record) error {
	id := chainID{poll: r.Poll, replica: r.Replica}
	c, ok := v.chains[id]
	if !ok {
		c = &Chain{Poll: r.Poll, Replica: r.Replica}
		v.chains[id] = c
	}
	if r.Seq != c.Records+1 {
		return fmt.Errorf("%w: %s/%s expected seq %d, got %d", ErrChain, r.Poll, r.Replica, c.Records+1, r.Seq)
	}
	if r.Prev != c.Head {
		return fmt.Errorf("%w: %s/%s seq %d does not link to seq %d", ErrChain, r.Poll, r.Replica, r.Seq, c.Records)
	}
	c.Records, c.Head = r.Seq, r.Hash()
	return nil
}

// Chains returns the chains seen, sorted by poll then replica.
func (v *Verifier) Chains() []Chain {
	ids := slices.SortedFunc(maps.Keys(v.chains), func(a, b chainID) int {
		if a.poll != b.poll {
			return strings.Compare(a.poll, b.poll)
		}
		return strings.Compare(a.replica, b.replica)
	})
	out := make([]Chain, 0, len(ids))
	for _, id := range ids {
		out = append(out, *v.chains[id])
	}
	return out
}

// VerifyChains reads records and checks every chain in them.
func VerifyChains(records iter.Seq2[Record, error]) ([]Chain, error) {
	v := NewVerifier()
	for r, err := range records {
		if err != nil {
			return nil, err
		}
		if err := v.Add(&r); err != nil {
			return nil, err
		}
	}
	return v.Chains(), nil
}
