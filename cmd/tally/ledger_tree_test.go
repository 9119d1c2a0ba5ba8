package main

import (
	"cmp"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tally/ledger"
	"tally/merkle"
	"tally/receipt"
)

// certificateTree is the tree a certifier builds over the files'
// records, computed here the plain way: every record read and hashed,
// chains by replica id, each by seq, merkle.New over the hashes.
func certificateTree(t *testing.T, files ...string) (uint64, string) {
	t.Helper()
	byReplica := map[string][]ledger.Record{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		for r, err := range ledger.ReadNDJSON(f) {
			if err != nil {
				t.Fatal(err)
			}
			byReplica[r.Replica] = append(byReplica[r.Replica], r)
		}
		f.Close()
	}
	var hashes []merkle.Hash
	for _, replica := range slices.Sorted(maps.Keys(byReplica)) {
		recs := byReplica[replica]
		slices.SortFunc(recs, func(a, b ledger.Record) int { return cmp.Compare(a.Seq, b.Seq) })
		for i, r := range recs {
			if i > 0 && r.Seq == recs[i-1].Seq {
				continue // the same record in two files
			}
			hashes = append(hashes, merkle.Hash(r.Hash()))
		}
	}
	tree := merkle.New(hashes)
	root := tree.Root()
	return tree.Size(), hex.EncodeToString(root[:])
}

// ledger merge prints the tree over the records (and puts it in its
// JSON): the size and root a certificate's tree head names, whatever the
// order of the files and with a file given twice.
func TestLedgerTreeMerge(t *testing.T) {
	files := writeExports(t) // eu-1, us-1: 50 records each
	size, root := certificateTree(t, files...)
	if size != 100 {
		t.Fatalf("the exports hold %d records", size)
	}
	for _, args := range [][]string{files, {files[1], files[0]}, {files[0], files[1], files[0]}} {
		out, stderr, code := runCLI(t, append([]string{"ledger", "merge"}, args...)...)
		if code != 0 || !strings.Contains(out, "tree: 100 records, root "+root+"\n") {
			t.Fatalf("merge %v: %d, want tree: 100 records, root %s\n%s%s", args, code, root, out, stderr)
		}
	}
	out, stderr, code := runCLI(t, "ledger", "merge", "--json", files[1], files[0])
	var got struct {
		ledger.Result
		TreeSize uint64 `json:"tree_size"`
		TreeRoot string `json:"tree_root"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("--json: %d %v\n%s%s", code, err, out, stderr)
	}
	if got.TreeSize != 100 || got.TreeRoot != root || got.Digest == "" || got.Total == 0 {
		t.Fatalf("--json: tree %d %s, want 100 %s (%+v)", got.TreeSize, got.TreeRoot, root, got.Result)
	}

	// One chain alone: its own tree.
	size, root = certificateTree(t, files[1])
	if out, _, code := runCLI(t, "ledger", "merge", files[1]); code != 0 || !strings.Contains(out, "tree: 50 records, root "+root) || size != 50 {
		t.Fatalf("us-1 alone: %d\n%s", code, out)
	}
}

// With --certificate, the certificate's tree is compared too: the same
// size and root reproduce it; another root or size is NOT REPRODUCED,
// named; a certificate without a tree (an older release's) has no root to
// compare, and says so.
func TestLedgerTreeMergeCertificate(t *testing.T) {
	files := writeExports(t)
	size, root := certificateTree(t, files...)
	v := lostReplicaCertificate(t, files)
	dir := t.TempDir()
	withTree := func(name string, tree *receipt.TreeHead) string {
		c := v
		d := *v.Detail
		d.Tree = tree
		c.Detail = &d
		b, _ := json.Marshal(c)
		file := filepath.Join(dir, name)
		os.WriteFile(file, b, 0o644)
		return file
	}
	head := func(size uint64, root string) *receipt.TreeHead {
		return &receipt.TreeHead{Poll: "final", Size: size, Root: root, Digest: v.Digest, By: "eu-1"}
	}
	other := strings.Repeat("0", 64)
	for _, c := range []struct {
		name string
		tree *receipt.TreeHead
		code int
		want string
	}{
		{"the same tree", head(size, root), 0, "reproduced: the certificate's tree, 100 records, root " + root},
		{"another root", head(size, other), 1, "TREE DIFFERS: the files' tree is 100 records with root " + root + ", the certificate's 100 with root " + other},
		{"another size", head(size+1, root), 1, "TREE DIFFERS"},
		{"no tree", nil, 0, "the certificate holds no tree"},
	} {
		cert := withTree(strings.ReplaceAll(c.name, " ", "-")+".json", c.tree)
		out, stderr, code := runCLI(t, "ledger", "merge", "--certificate", cert, files[0], files[1])
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d, want %d and %q\n%s%s", c.name, code, c.code, c.want, out, stderr)
		}
		if c.code == 1 && !strings.Contains(out, "NOT REPRODUCED") {
			t.Errorf("%s: not NOT REPRODUCED\n%s", c.name, out)
		}
		// Under --json the comparison goes to stderr, the same.
		_, stderr, code = runCLI(t, "ledger", "merge", "--json", "--certificate", cert, files[0], files[1])
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%s, --json: exit %d, want %d and %q\n%s", c.name, code, c.code, c.want, stderr)
		}
	}
}

// The tree of an empty merge is the empty tree's, and the one-pass root
// of the merge equals merkle.New's for every size of chain up to a few
// hundred (odd sizes and powers of two alike).
func TestLedgerTreeSizes(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 8, 9, 64, 65, 300} {
		recs := make([]*ledger.Record, n)
		var prev ledger.Hash
		hashes := make([]merkle.Hash, n)
		taps := make([]treeTap, 2)
		for i := range recs {
			recs[i] = &ledger.Record{Poll: "p", Replica: "r-1", Seq: uint64(i + 1), Wall: int64(1000 + i), Voter: "v", Option: "o", Idem: hex.EncodeToString([]byte{byte(i), byte(i >> 8)}), Prev: prev}
			prev = recs[i].Hash()
			hashes[i] = merkle.Hash(prev)
		}
		// Two streams, the records split between them out of order.
		half := func(odd int) func(yield func(ledger.Record, error) bool) {
			return func(yield func(ledger.Record, error) bool) {
				for i := n - 1; i >= 0; i-- {
					if i%2 == odd && !yield(*recs[i], nil) {
						return
					}
				}
			}
		}
		for range taps[0].tap(half(0)) {
		}
		for range taps[1].tap(half(1)) {
		}
		got := mergeTree([]ledger.Chain{{Replica: "r-1", Records: uint64(n), Head: prev}}, taps)
		want := merkle.New(hashes).Root()
		if got.size != uint64(n) || got.root != hex.EncodeToString(want[:]) {
			t.Fatalf("n=%d: %+v, want %x", n, got, want)
		}
	}
	empty := mergeTree(nil, nil)
	want := merkle.New(nil).Root()
	if empty.size != 0 || empty.root != hex.EncodeToString(want[:]) {
		t.Fatalf("empty: %+v", empty)
	}
}
