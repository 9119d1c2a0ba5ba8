package certify

import (
	"slices"
	"testing"
)

// TestOrderIsSharedAndSpreads: every node computes the same order from the
// same members whatever order it lists them in, and different polls get
// different coordinators.
func TestOrderIsSharedAndSpreads(t *testing.T) {
	replicas := []string{"eu-west-1a", "us-east-2b", "ap-south-3c", "eu-west-4d"}
	a := Order("final", replicas)
	b := Order("final", []string{replicas[3], replicas[1], replicas[0], replicas[2]})
	if !slices.Equal(a, b) {
		t.Fatalf("order depends on the input order: %v vs %v", a, b)
	}
	firsts := map[string]bool{}
	for i := range 40 {
		firsts[Order(string(rune('a'+i%26))+"-poll", replicas)[0]] = true
	}
	if len(firsts) < 3 {
		t.Fatalf("40 polls share %d coordinators", len(firsts))
	}
	// A member leaving shifts the order; the rest keep their relative order.
	rest := Order("final", replicas[1:])
	if !slices.Equal(rest, slices.DeleteFunc(slices.Clone(a), func(r string) bool { return r == replicas[0] })) {
		t.Fatalf("removing a member reorders the rest: %v vs %v", rest, a)
	}
}
