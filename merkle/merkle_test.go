package merkle

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// hashes returns n leaves, distinct: record hashes and dispositions.
func hashes(n int) []Leaf {
	out := make([]Leaf, n)
	for i := range out {
		out[i] = LeafOf(sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i))), byte(1+i%5))
	}
	return out
}

func all(hs []Leaf) func(func(Leaf) bool) {
	return func(yield func(Leaf) bool) {
		for _, h := range hs {
			if !yield(h) {
				return
			}
		}
	}
}

// RFC 9162's MTH, written out from §2.1.1 as the reference the tree and
// the compact range are checked against.
func mth(leaves []Leaf) Hash {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return sha256.Sum256(append([]byte{0}, leaves[0][:]...))
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	l, r := mth(leaves[:k]), mth(leaves[k:])
	return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
}

// The root is RFC 9162's, for every size from 0 to 300, built whole or in
// one pass.
func TestRootIsRFC9162(t *testing.T) {
	for n := 0; n <= 300; n++ {
		hs := hashes(n)
		want := mth(hs)
		if got := New(hs).Root(); got != want {
			t.Fatalf("n=%d: tree root %x, want %x", n, got, want)
		}
		got, size, err := Root(all(hs))
		if err != nil || got != want || size != uint64(n) {
			t.Fatalf("n=%d: one-pass root %x (%d, %v), want %x", n, got, size, err, want)
		}
	}
}

// Every leaf of random trees of 1 to 100,000 leaves verifies against the
// root; a proof of another leaf, a flipped bit anywhere in the leaf, the
// path or the root, a shortened path or a wrong index, each fails.
func TestEveryLeafProvesAndNothingElse(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 100_000).Draw(t, "n")
		if n > 2000 && rapid.IntRange(0, 9).Draw(t, "big") != 0 {
			n = n % 2000 // most trees small, so that every leaf of them is checked
			n++
		}
		hs := hashes(n)
		tree := New(hs)
		root := tree.Root()
		step := max(1, n/500) // of a big tree, 500 leaves spread over it
		for i := 0; i < n; i += step {
			path, err := tree.Proof(uint64(i))
			if err != nil {
				t.Fatalf("leaf %d of %d: %v", i, n, err)
			}
			if err := VerifyInclusion(hs[i], uint64(i), uint64(n), path, root); err != nil {
				t.Fatalf("leaf %d of %d does not verify: %v", i, n, err)
			}
		}
		i := rapid.IntRange(0, n-1).Draw(t, "i")
		path, _ := tree.Proof(uint64(i))
		flip := func(h Hash, bit int) Hash { h[bit/8] ^= 1 << (bit % 8); return h }
		flipLeaf := func(l Leaf, bit int) Leaf { l[bit/8] ^= 1 << (bit % 8); return l }
		bit := rapid.IntRange(0, 255).Draw(t, "bit")
		fails := map[string]error{
			"flipped leaf":        VerifyInclusion(flipLeaf(hs[i], bit), uint64(i), uint64(n), path, root),
			"flipped disposition": VerifyInclusion(flipLeaf(hs[i], 256+bit%8), uint64(i), uint64(n), path, root),
			"flipped root":        VerifyInclusion(hs[i], uint64(i), uint64(n), path, flip(root, bit)),
		}
		if len(path) > 0 {
			j := rapid.IntRange(0, len(path)-1).Draw(t, "j")
			bad := append([]Hash(nil), path...)
			bad[j] = flip(bad[j], bit)
			fails["flipped path"] = VerifyInclusion(hs[i], uint64(i), uint64(n), bad, root)
			fails["shortened path"] = VerifyInclusion(hs[i], uint64(i), uint64(n), path[:len(path)-1], root)
		}
		if n > 1 {
			other := (i + 1) % n
			fails["another leaf"] = VerifyInclusion(hs[other], uint64(i), uint64(n), path, root)
			fails["wrong index"] = VerifyInclusion(hs[i], uint64(other), uint64(n), path, root)
		}
		// A wrong size can verify (leaf 0 of 3 and of 4 share a path when
		// the fourth is the third's twin): the size is signed with the
		// root in the certificate, and checked there.
		for what, err := range fails {
			if !errors.Is(err, ErrProof) {
				t.Fatalf("%s (leaf %d of %d): %v, want ErrProof", what, i, n, err)
			}
		}
	})
}

func TestProofOutsideTheTree(t *testing.T) {
	if _, err := New(hashes(3)).Proof(3); !errors.Is(err, ErrProof) {
		t.Fatalf("leaf 3 of 3: %v", err)
	}
	if _, err := New(nil).Proof(0); !errors.Is(err, ErrProof) {
		t.Fatalf("leaf 0 of an empty tree: %v", err)
	}
}

// Building the tree over 1,000,000 records, and the one-pass root: what
// certification of a million votes would add (issue 62: at most 0.3 s).
func BenchmarkTree1M(b *testing.B) {
	hs := hashes(1_000_000)
	b.Run("tree", func(b *testing.B) {
		for b.Loop() {
			New(hs)
		}
	})
	b.Run("root", func(b *testing.B) {
		for b.Loop() {
			Root(all(hs))
		}
	})
	tree := New(hs)
	root := tree.Root()
	b.Run("proof+verify", func(b *testing.B) {
		for b.Loop() {
			i := uint64(rand.IntN(len(hs)))
			p, _ := tree.Proof(i)
			if err := VerifyInclusion(hs[i], i, uint64(len(hs)), p, root); err != nil {
				b.Fatal(err)
			}
		}
	})
}
