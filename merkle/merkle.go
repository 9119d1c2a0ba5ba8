package merkle

import (
	"crypto"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// Hash is a SHA-256 hash: a record's (ledger.Record.Hash) or a node's.
type Hash = [32]byte

// Leaf is a leaf's data: a record's hash, then one byte of what the
// certified rules made of it (its disposition, ledger.Disposition), so
// that the root commits to every record and to what became of each.
// RFC 9162 hashes a leaf as SHA-256(0x00 ‖ data): one block, as a bare
// record hash would be.
type Leaf = [33]byte

// LeafOf is the leaf of a record's hash and its disposition.
func LeafOf(recordHash Hash, disposition byte) Leaf {
	var l Leaf
	copy(l[:], recordHash[:])
	l[32] = disposition
	return l
}

// ErrProof is returned for an inclusion proof that does not hold, or a
// leaf outside the tree.
var ErrProof = errors.New("merkle: proof")

// ErrRootMismatch is an inclusion proof whose path is well formed and
// leads to another root: the record is not in the tree the root names.
var ErrRootMismatch = fmt.Errorf("%w: the path leads to another root", ErrProof)

// treeHasher is RFC 9162's (RFC 6962's) hasher over SHA-256.
var treeHasher = rfc6962.New(crypto.SHA256)

// Tree is the tree over some records' hashes, every level kept
// (about 64 bytes a record): the root at once, a proof in log2(n) steps.
type Tree struct {
	levels [][]Hash // levels[0]: the leaves' nodes; an unpaired last node goes up as it is
}

// New builds the tree over the leaves, in their order. A big tree's
// levels are hashed by every core at once, in chunks (the hashes of one
// level are independent).
func New(data []Leaf) *Tree {
	leaves := make([]Hash, len(data))
	inParallel(len(leaves), func(from, to int) {
		for i := from; i < to; i++ {
			leaves[i] = leafNode(data[i])
		}
	})
	t := &Tree{levels: [][]Hash{leaves}}
	for cur := leaves; len(cur) > 1; {
		next := make([]Hash, (len(cur)+1)/2)
		inParallel(len(cur)/2, func(from, to int) {
			for i := from; i < to; i++ {
				next[i] = innerNode(cur[2*i], cur[2*i+1])
			}
		})
		if len(cur)%2 == 1 {
			next[len(next)-1] = cur[len(cur)-1]
		}
		t.levels = append(t.levels, next)
		cur = next
	}
	return t
}

// leafNode and innerNode are treeHasher's HashLeaf and HashChildren on
// fixed-size inputs, on the stack: the tree's two million hashes a
// million records then allocate nothing (the tests check them against
// RFC 9162's definition).
func leafNode(l Leaf) Hash {
	var b [1 + len(l)]byte // 0x00 ‖ leaf data
	copy(b[1:], l[:])
	return sha256.Sum256(b[:])
}

func innerNode(l, r Hash) Hash {
	var b [1 + 64]byte // 0x01 ‖ left ‖ right
	b[0] = 1
	copy(b[1:], l[:])
	copy(b[33:], r[:])
	return sha256.Sum256(b[:])
}

// parallelFrom is the size below which a level is hashed on one core
// (a goroutine's start costs more than a few thousand hashes).
const parallelFrom = 1 << 14

// inParallel runs do over [0, n) in GOMAXPROCS chunks, or in one call for
// a small n, and returns when every chunk is done.
func inParallel(n int, do func(from, to int)) {
	workers := runtime.GOMAXPROCS(0)
	if n < parallelFrom || workers < 2 {
		do(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for from := 0; from < n; from += chunk {
		wg.Go(func() { do(from, min(from+chunk, n)) })
	}
	wg.Wait()
}

// Size is the number of leaves.
func (t *Tree) Size() uint64 { return uint64(len(t.levels[0])) }

// Root is the tree's root hash (an empty tree's: SHA-256 of nothing).
func (t *Tree) Root() Hash {
	var root Hash
	if t.Size() == 0 {
		copy(root[:], treeHasher.EmptyRoot())
		return root
	}
	return t.levels[len(t.levels)-1][0]
}

// Proof is the inclusion proof (audit path) of leaf index: the sibling
// hashes from the leaf up, as RFC 9162 §2.1.3.1 defines them.
func (t *Tree) Proof(index uint64) ([]Hash, error) {
	size := t.Size()
	if index >= size {
		return nil, fmt.Errorf("%w: leaf %d of a tree of %d", ErrProof, index, size)
	}
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProof, err)
	}
	hashes := make([][]byte, len(nodes.IDs))
	for i, id := range nodes.IDs {
		hashes[i] = t.levels[id.Level][id.Index][:] // a perfect subtree's node: the same with or without carries
	}
	path, err := nodes.Rehash(hashes, treeHasher.HashChildren)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProof, err)
	}
	out := make([]Hash, len(path))
	for i, p := range path {
		copy(out[i][:], p)
	}
	return out, nil
}

// VerifyInclusion checks that leaf is leaf index of a tree of size
// leaves whose root is root, by the audit path.
func VerifyInclusion(leaf Leaf, index, size uint64, path []Hash, root Hash) error {
	p := make([][]byte, len(path))
	for i := range path {
		p[i] = path[i][:]
	}
	if err := proof.VerifyInclusion(treeHasher, index, size, treeHasher.HashLeaf(leaf[:]), p, root[:]); err != nil {
		if _, ok := errors.AsType[proof.RootMismatchError](err); ok {
			return fmt.Errorf("%w: %v", ErrRootMismatch, err)
		}
		return fmt.Errorf("%w: %v", ErrProof, err)
	}
	return nil
}

// Root is the root of the tree over the leaves, computed in one
// pass with log2(n) hashes of memory: what a certifier and an auditor's
// merge need, without the tree. It keeps the roots of the perfect
// subtrees so far (a compact range, as transparency-dev/merkle/compact
// does; by hand here, since the library's allocates seven times a record
// and took 3x as long), and folds them from the right at the end.
func Root(leaves func(yield func(Leaf) bool)) (root Hash, size uint64, err error) {
	var stack []Hash // the perfect subtrees' roots, largest first; stack[i]'s size is the i-th set bit of size, from the top
	for l := range leaves {
		stack = append(stack, leafNode(l))
		size++
		for s := size; s&1 == 0; s >>= 1 { // a carry: two subtrees of one size make one
			n := len(stack)
			stack[n-2] = innerNode(stack[n-2], stack[n-1])
			stack = stack[:n-1]
		}
	}
	if size == 0 {
		return sha256.Sum256(nil), 0, nil
	}
	root = stack[len(stack)-1]
	for i := len(stack) - 2; i >= 0; i-- {
		root = innerNode(stack[i], root)
	}
	return root, size, nil
}
