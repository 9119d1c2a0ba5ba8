package testbin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A $TALLY_NODE_BIN that is missing or not executable is refused, naming
// the variable; one that is is used as it is.
func TestNodeFromTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("x"), 0o600)
	exe := filepath.Join(dir, "exe")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o700)
	for _, tc := range []struct {
		bin, wantErr string
	}{
		{filepath.Join(dir, "missing"), "$TALLY_NODE_BIN"},
		{plain, "not an executable"},
		{dir, "not an executable"},
		{exe, ""},
	} {
		t.Run(filepath.Base(tc.bin), func(t *testing.T) {
			t.Setenv(Env, tc.bin)
			got, err := find()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Node() = %q, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.bin {
				t.Fatalf("Node() = %q, %v; want %q", got, err, tc.bin)
			}
		})
	}
}
