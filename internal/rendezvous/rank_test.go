package rendezvous

import (
	"fmt"
	"slices"
	"testing"
)

// TestRankIsSharedAndStable: the ranking does not depend on the order the
// nodes are listed in, the input is left alone, and a node leaving moves
// only the keys it ranked first (the rest keep their relative order).
func TestRankIsSharedAndStable(t *testing.T) {
	nodes := []string{"eu-west-1a", "us-east-2b", "ap-south-3c", "eu-west-4d"}
	listed := slices.Clone(nodes)
	a := Rank("final", nodes)
	if !slices.Equal(nodes, listed) {
		t.Fatalf("Rank changed its input: %v", nodes)
	}
	b := Rank("final", []string{nodes[3], nodes[1], nodes[0], nodes[2]})
	if !slices.Equal(a, b) {
		t.Fatalf("the ranking depends on the input order: %v vs %v", a, b)
	}
	for i := range 200 {
		key := fmt.Sprintf("key-%d", i)
		all := Rank(key, nodes)
		rest := Rank(key, nodes[1:])
		if !slices.Equal(rest, slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == nodes[0] })) {
			t.Fatalf("%s: removing %s reorders the rest: %v vs %v", key, nodes[0], rest, all)
		}
	}
}

// TestRankSpreads: keys spread over the nodes, none taking more than
// twice its share of 4,000 keys (the hash is fixed, so this is exact).
func TestRankSpreads(t *testing.T) {
	nodes := []string{"a", "b", "c", "d", "e"}
	first := map[string]int{}
	const keys = 4000
	for i := range keys {
		first[Rank(fmt.Sprintf("poll\x00idem-%d", i), nodes)[0]]++
	}
	for _, n := range nodes {
		if c := first[n]; c < keys/len(nodes)/2 || c > 2*keys/len(nodes) {
			t.Fatalf("node %s ranks first for %d of %d keys: %v", n, c, keys, first)
		}
	}
}

func TestRankEdges(t *testing.T) {
	if got := Rank("k", nil); len(got) != 0 {
		t.Fatalf("no nodes: %v", got)
	}
	if got := Rank("", []string{"only"}); !slices.Equal(got, []string{"only"}) {
		t.Fatalf("one node: %v", got)
	}
	// The same name twice ranks twice, side by side (callers list members once).
	if got := Rank("k", []string{"x", "y", "x"}); len(got) != 3 {
		t.Fatalf("duplicates: %v", got)
	}
}
