package ledger

import (
	"fmt"
	"testing"
)

// TestIdemFilterNeverMissesAKey: across the layers' growth every key added
// is reported as maybe present, and keys never added mostly are not.
func TestIdemFilterNeverMissesAKey(t *testing.T) {
	f := newIdemFilter()
	const n = 1_000_000 // past four layers: 64k, 128k, 256k, 512k, 1M
	key := func(p string, i int) []byte { return fmt.Appendf(nil, "%s\x00poll\x00idem-%d", p, i) }
	for i := range n {
		f.add(key("in", i))
	}
	if len(f.layers) < 5 {
		t.Fatalf("%d layers for %d keys", len(f.layers), n)
	}
	for i := range n {
		if !f.mayContain(key("in", i)) {
			t.Fatalf("key %d added but reported absent", i)
		}
	}
	false_ := 0
	for i := range n {
		if f.mayContain(key("out", i)) {
			false_++
		}
	}
	// The rate is a property of the sizes (0.2% a layer, five layers), not
	// luck: the filter's hashes are fixed, so this count is too.
	if rate := float64(false_) / n; rate > 0.015 {
		t.Fatalf("false positives %.2f%% of absent keys, want under 1.5%%", 100*rate)
	} else {
		t.Logf("false positives: %.3f%% of %d absent keys", 100*rate, n)
	}
	if empty := newIdemFilter(); empty.mayContain(key("in", 0)) {
		t.Fatal("an empty filter claims a key")
	}
}
