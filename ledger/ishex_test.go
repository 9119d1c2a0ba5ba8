package ledger

import (
	"encoding/hex"
	"testing"
)

// isHex accepts exactly what hex.DecodeString decodes.
func FuzzIsHexIsDecodeString(f *testing.F) {
	for _, s := range []string{"", "0", "00", "ab", "AB", "aG", "0x", "deadbeef", "DEADBEEF0", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := hex.DecodeString(s)
		if got := isHex(s); got != (err == nil) {
			t.Fatalf("isHex(%q) = %t, hex.DecodeString: %v", s, got, err)
		}
	})
}
