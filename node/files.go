package node

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"tally/internal/atomicfile"
	"tally/ledger"
)

// The data directory's layout.
const (
	ledgerDir         = "ledger"     // Pebble
	replicaIDFile     = "replica-id" // this node's replica id, never reused
	adminTokenFile    = "admin-token"
	ipSaltFile        = "ip-salt"
	sessionSecretFile = "session-secret" // signs voter tokens when --session-secret is not given
	hlcFile           = "hlc"            // the clock's high-water mark
	signingKeyFile    = "signing-key"    // this replica's Ed25519 seed (hex): it signs the certificates it makes
)

// readOrCreate returns the trimmed content of dir/name, creating the file
// with make() (written and fsynced, mode 0600) when it does not exist.
func readOrCreate(dir, name string, make func() (string, error)) (value string, created bool, err error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err == nil {
		if v := strings.TrimSpace(string(b)); v != "" {
			return v, false, nil
		}
		return "", false, fmt.Errorf("%w: %s is empty: restore it from a backup, or remove it to have a new one made", ErrDamaged, path)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	v, err := make()
	if err != nil {
		return "", false, err
	}
	err = writeAtomic(dir, name, func(w io.Writer) error {
		_, err := io.WriteString(w, v+"\n")
		return err
	})
	return v, err == nil, err
}

// fileExists reports whether dir/name exists.
func fileExists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

// writeAtomic replaces dir/name with what write produces; a crash leaves
// the old file or the new one, never a mix (atomicfile.Write).
func writeAtomic(dir, name string, write func(io.Writer) error) error {
	return atomicfile.Write(filepath.Join(dir, name), write)
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// replicaID returns the node's replica id. A fresh data dir gets a new one:
// region plus random bits, so a node that lost its disk never reuses an
// old id (its new votes would hide under the old counts).
func replicaID(dir, region string) (string, error) {
	id, _, err := readOrCreate(dir, replicaIDFile, func() (string, error) {
		suffix, err := randomHex(4)
		return region + "-" + suffix, err
	})
	if err != nil {
		return "", fmt.Errorf("node: replica id: %w", err)
	}
	if err := ledger.ValidID(id); err != nil {
		return "", fmt.Errorf("%w: replica id in %s: %v", ErrConfig, filepath.Join(dir, replicaIDFile), err)
	}
	return id, nil
}

// checkWritable proves that files can be created, synced and renamed in
// the data dir, so that a read-only or immutable one stops the start with
// one line instead of failing at the first clock save or checkpoint.
func checkWritable(dir string) error {
	const probe = ".write-probe"
	if err := writeAtomic(dir, probe, func(w io.Writer) error { _, err := io.WriteString(w, "ok\n"); return err }); err != nil {
		return err
	}
	return os.Remove(filepath.Join(dir, probe))
}

// signingKey returns the replica's Ed25519 key, made with the data dir.
func signingKey(dir string) (ed25519.PrivateKey, error) {
	seed, _, err := readOrCreate(dir, signingKeyFile, func() (string, error) { return randomHex(ed25519.SeedSize) })
	if err != nil {
		return nil, err
	}
	b, err := hex.DecodeString(seed)
	if err != nil || len(b) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: %s is not a %d-byte hex seed", ErrDamaged, signingKeyFile, ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(b), nil
}
