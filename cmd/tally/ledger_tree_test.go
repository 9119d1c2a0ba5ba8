package main

import (
	"cmp"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
// chains by replica id, each by seq, each leaf the record's hash and its
// disposition under the rules (ledger.DisposeChains, the zero config:
// ledger merge's without flags), merkle.New over the leaves.
func certificateTree(t *testing.T, files ...string) (uint64, string) {
	t.Helper()
	byReplica := map[string][]*ledger.Record{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		for r, err := range ledger.ReadNDJSON(f) {
			if err != nil {
				t.Fatal(err)
			}
			byReplica[r.Replica] = append(byReplica[r.Replica], &r)
		}
		f.Close()
	}
	var chains [][]*ledger.Record
	for _, replica := range slices.Sorted(maps.Keys(byReplica)) {
		recs := byReplica[replica]
		slices.SortFunc(recs, func(a, b *ledger.Record) int { return cmp.Compare(a.Seq, b.Seq) })
		chains = append(chains, slices.CompactFunc(recs, func(a, b *ledger.Record) bool { return a.Seq == b.Seq })) // the same record in two files
	}
	return treeOver(t, chains...)
}

// treeOver is the size and root of the tree over the chains' records in
// the certificate's order, each leaf the record's hash and its
// disposition (ledger.DisposeChains).
func treeOver(t *testing.T, chains ...[]*ledger.Record) (uint64, string) {
	t.Helper()
	d, err := ledger.DisposeChains(ledger.ReconcileConfig{}, chains...)
	if err != nil {
		t.Fatal(err)
	}
	leaves := make([]merkle.Leaf, len(d.Records))
	for i, r := range d.Records {
		if d.Of[i] == 0 {
			t.Fatalf("no disposition for %s", r.ID())
		}
		leaves[i] = merkle.LeafOf(merkle.Hash(r.Hash()), byte(d.Of[i]))
	}
	tree := merkle.New(leaves)
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
// of the merge, over the hashes the streams carry and the dispositions
// the reconcile found, equals merkle.New's over each record's hash and
// disposition for every size of chain up to a few hundred (odd sizes and
// powers of two alike; voters with one record and with several, some
// late, some filtered, some retried).
func TestLedgerTreeSizes(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 8, 9, 64, 65, 300} {
		recs := make([]*ledger.Record, n)
		var prev ledger.Hash
		taps := make([]treeTap, 2)
		for i := range recs {
			recs[i] = &ledger.Record{Poll: "p", Replica: "r-1", Seq: uint64(i + 1), Wall: int64(1000 + i), Voter: fmt.Sprintf("v%d", i%5), Option: "o",
				Idem: hex.EncodeToString([]byte{byte(i), byte(i >> 8)}), Trust: 1, Counted: i%11 != 10, Late: i%13 == 12, Prev: prev}
			if i%9 == 8 {
				recs[i].Voter, recs[i].Idem = recs[i-1].Voter, recs[i-1].Idem // a retry
			}
			prev = recs[i].Hash()
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
		res, err := ledger.ReconcileWith(ledger.ReconcileConfig{}, taps[0].tap(half(0)), taps[1].tap(half(1)))
		if err != nil {
			t.Fatal(err)
		}
		if res.Records != uint64(n) || len(res.Replicas) != 1 || res.Replicas[0].Head != prev {
			t.Fatalf("n=%d: reconciled %+v", n, res)
		}
		got := mergeTree(res, taps)
		size, root := treeOver(t, recs)
		if got.size != size || size != uint64(n) || got.root != root {
			t.Fatalf("n=%d: %+v, want %d %s", n, got, n, root)
		}
		if n >= 64 && (res.Late == 0 || res.Shadowed == 0 || res.Duplicates == 0 || res.Superseded == 0) {
			t.Fatalf("n=%d: not every disposition: %+v", n, res)
		}
	}
	res, err := ledger.ReconcileChains(ledger.ReconcileConfig{Poll: "p"})
	if err != nil {
		t.Fatal(err)
	}
	empty := mergeTree(res, nil)
	want := merkle.New(nil).Root()
	if empty.size != 0 || empty.root != hex.EncodeToString(want[:]) {
		t.Fatalf("empty: %+v", empty)
	}
}

// The merge's root commits to the dispositions: the same records under
// another rule (a trust floor that filters some) make another root, the
// one merkle.New makes over the new dispositions.
func TestLedgerTreeDispositions(t *testing.T) {
	var recs []*ledger.Record
	var prev ledger.Hash
	for i := range 20 {
		r := &ledger.Record{Poll: "p", Replica: "r-1", Seq: uint64(i + 1), Wall: int64(1000 + i), Voter: fmt.Sprintf("v%d", i), Option: "o",
			Idem: fmt.Sprintf("k%d", i), Trust: float64(i) / 20, Counted: true, Prev: prev}
		prev = r.Hash()
		recs = append(recs, r)
	}
	rootUnder := func(cfg ledger.ReconcileConfig) (treeRoot, string) {
		var tap treeTap
		res, err := ledger.ReconcileWith(cfg, tap.tap(func(yield func(ledger.Record, error) bool) {
			for _, r := range recs {
				if !yield(*r, nil) {
					return
				}
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
		d, err := ledger.DisposeChains(cfg, recs)
		if err != nil {
			t.Fatal(err)
		}
		leaves := make([]merkle.Leaf, len(recs))
		for i, r := range d.Records {
			if res.Disposition(r.Replica, r.Seq) != d.Of[i] {
				t.Fatalf("%s: the reconcile says %d, DisposeChains %d", r.ID(), res.Disposition(r.Replica, r.Seq), d.Of[i])
			}
			leaves[i] = merkle.LeafOf(merkle.Hash(r.Hash()), byte(d.Of[i]))
		}
		want := merkle.New(leaves).Root()
		return mergeTree(res, []treeTap{tap}), hex.EncodeToString(want[:])
	}
	all, wantAll := rootUnder(ledger.ReconcileConfig{})
	floored, wantFloored := rootUnder(ledger.ReconcileConfig{TrustFloor: 0.5})
	if all.root != wantAll || floored.root != wantFloored || all.size != 20 || floored.size != 20 {
		t.Fatalf("all %+v, want %s; with a floor %+v, want %s", all, wantAll, floored, wantFloored)
	}
	if all.root == floored.root {
		t.Fatal("the floor filters half the records and the root stays the same")
	}
}
