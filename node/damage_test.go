package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// votedAndStopped runs a node, acks n votes, stops it cleanly (a final
// checkpoint is written) and returns its data dir and newest WAL.
func votedAndStopped(t *testing.T, n int) (dir, wal string, ms int64) {
	t.Helper()
	dir = t.TempDir()
	tn := startNode(t, dir, nil)
	tn.createPoll(t, "p")
	for i := range n {
		if s, _ := tn.castVote(t, "p", "a", fmt.Sprintf("v%d", i), fmt.Sprintf("k%d", i)); s != "accepted" {
			t.Fatalf("vote %d: %s", i, s)
		}
	}
	if err := tn.stop(); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, ledgerDir, "*.log"))
	if len(logs) == 0 {
		t.Fatal("no write-ahead log")
	}
	return dir, logs[len(logs)-1], tn.clock.ms.Load()
}

// startFails runs New and Run on dir and returns the error that stops the
// node before it is ready.
func startFails(t *testing.T, dir string, ms int64) error {
	t.Helper()
	clock := &fakeClock{}
	clock.ms.Store(ms)
	n, err := Open(testConfig(dir, clock))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = n.Run(ctx)
	if n.ready.Load() || err == nil {
		t.Fatalf("the node served from a damaged data dir (err %v)", err)
	}
	return err
}

// A byte flipped in the middle of the WAL: the node refuses to start with
// one line naming the damage and the recovery procedure, instead of
// serving 71 of 200 records and reusing their sequence numbers.
func TestNodeRefusesWALDamagedInTheMiddle(t *testing.T) {
	dir, wal, ms := votedAndStopped(t, 200)
	data, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	// Flip a byte inside the records, well before their end.
	used := len(strings.TrimRight(string(data), "\x00"))
	data[used/2] ^= 0x01
	if err := os.WriteFile(wal, data, 0o600); err != nil {
		t.Fatal(err)
	}
	err = startFails(t, dir, ms)
	if !errors.Is(err, ErrDamaged) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "docs/operations.md") ||
		!strings.Contains(err.Error(), filepath.Base(wal)) {
		t.Fatalf("start on a damaged WAL: %v", err)
	}
}

// Records lost so that the WAL looks like a torn tail (here: cut in half)
// are caught by the checkpoint, which counted every acknowledged record.
func TestNodeRefusesLedgerShorterThanItsCheckpoint(t *testing.T) {
	dir, wal, ms := votedAndStopped(t, 200)
	data, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	used := len(strings.TrimRight(string(data), "\x00"))
	if err := os.Truncate(wal, int64(used/2)); err != nil {
		t.Fatal(err)
	}
	err = startFails(t, dir, ms)
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "the ledger holds") {
		t.Fatalf("start on a shortened ledger: %v", err)
	}
}

// TestDamagedDataFilesAreRefused: an emptied identity file, or a clock
// mark far in the future, stops the node at start with one line naming the
// file — never a node that runs without an admin token, hashes addresses
// without a salt, or stamps every vote after its poll's close (issue 26,
// item 4).
func TestDamagedDataFilesAreRefused(t *testing.T) {
	dir, _, ms := votedAndStopped(t, 3)
	for _, c := range []struct{ file, content string }{
		{adminTokenFile, ""}, {ipSaltFile, "  \n"}, {replicaIDFile, "\n"}, {signingKeyFile, ""}, {sessionSecretFile, ""},
		{hlcFile, "9999999999999\n"}, {hlcFile, ""}, {hlcFile, "soon"},
	} {
		path := filepath.Join(dir, c.file)
		old, readErr := os.ReadFile(path)
		os.WriteFile(path, []byte(c.content), 0o600)
		clock := &fakeClock{}
		clock.ms.Store(ms)
		cfg := testConfig(dir, clock)
		cfg.AdminToken, cfg.SessionSecret = "", "" // from the data dir
		_, err := Open(cfg)
		if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s holding %q: %v, want one line of ErrDamaged naming it", c.file, c.content, err)
		}
		if readErr == nil {
			os.WriteFile(path, old, 0o600)
		} else {
			os.Remove(path)
		}
	}
	// A mark a few seconds ahead is what a restart leaves: it starts.
	os.WriteFile(filepath.Join(dir, hlcFile), []byte(fmt.Sprint(ms+5000)), 0o600)
	clock := &fakeClock{}
	clock.ms.Store(ms)
	n, err := Open(testConfig(dir, clock))
	if err != nil {
		t.Fatalf("a mark 5 s ahead: %v", err)
	}
	if err := n.Close(context.Background()); err != nil { // never run: closes what Open opened
		t.Fatal(err)
	}
}
