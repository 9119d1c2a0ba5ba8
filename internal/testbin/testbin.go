package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Env names a prebuilt node binary.
const Env = "TALLY_NODE_BIN"

// Node returns the path of the node binary (tally/cmd/node): $TALLY_NODE_BIN
// when set, else one built (without the race detector) on the first call.
// Call Remove from TestMain, after m.Run: what Node built is deleted, and
// a later Node call would return its path all the same.
func Node() (string, error) { return node() }

var node = sync.OnceValues(find)

// find is Node's first call.
func find() (string, error) {
	if bin := os.Getenv(Env); bin != "" {
		fi, err := os.Stat(bin)
		if err != nil {
			return "", fmt.Errorf("testbin: $%s: %w", Env, err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("testbin: $%s=%s is not an executable file", Env, bin)
		}
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "tally-node-test-")
	if err != nil {
		return "", fmt.Errorf("testbin: %w", err)
	}
	mu.Lock()
	built = dir
	mu.Unlock()
	bin := filepath.Join(dir, "tally-node")
	if out, err := exec.Command("go", "build", "-o", bin, "tally/cmd/node").CombinedOutput(); err != nil {
		return "", fmt.Errorf("testbin: go build tally/cmd/node: %w\n%s", err, out)
	}
	return bin, nil
}

var (
	mu    sync.Mutex
	built string // the directory Node built into, if it did
)

// Remove deletes the binary Node built, if it built one.
func Remove() {
	mu.Lock()
	defer mu.Unlock()
	if built != "" {
		os.RemoveAll(built)
		built = ""
	}
}
