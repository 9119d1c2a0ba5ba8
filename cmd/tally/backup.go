package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"tally/internal/backup"
	"tally/ledger"
)

// maxBackup caps what `tally ledger backup` unpacks: far above any ledger
// this product keeps (a million votes take about 200 MB).
const maxBackup = 1 << 40

// ledgerBackup fetches GET /v1/backup from a running node into a new
// directory and checks it: the ledger opens and every poll's chains verify.
func ledgerBackup(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally ledger backup", "tally ledger backup [--url URL] -o DIR")
	var nf nodeFlags
	nf.register(fs)
	out := fs.String("o", "", "directory to write the backup into (must not exist, or be empty)")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *out == "" || fs.NArg() > 0 {
		return usageError(fs, stderr, "-o DIR is required, and nothing else")
	}
	c, err := nf.client()
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 2
	}
	start := time.Now()
	body, err := c.Backup(context.Background())
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", nf.explain(err))
		return 1
	}
	m, err := backup.Extract(body, *out, maxBackup)
	body.Close()
	if err != nil {
		if errors.Is(err, backup.ErrNotEmpty) {
			fmt.Fprintf(stderr, "tally: %s is not empty: give -o a new or empty directory (nothing was written)\n", *out)
			return 1
		}
		fmt.Fprintf(stderr, "tally: backup into %s failed (remove it before trying again): %v\n", *out, err)
		return 1
	}
	polls, records, err := verifyBackup(*out)
	if err != nil {
		fmt.Fprintf(stderr, "tally: the backup in %s does not verify: %v\n", *out, err)
		return 1
	}
	// Polls no one voted in yet have no chain: their definitions are in the
	// backup, but counting them here would take reading the state.
	fmt.Fprintf(stdout, "backup of replica %s (region %s, node %s) taken %s: %d %s of %d %s with votes, chains verified, in %s\n",
		m.Replica, m.Region, m.Node, time.UnixMilli(m.CreatedAt).UTC().Format(time.RFC3339), records, plural(uint64(records), "record", "records"), polls, plural(uint64(polls), "poll", "polls"), *out)
	holds := "the replica's signing key"
	if _, err := os.Stat(filepath.Join(*out, sessionSecretFile)); err == nil {
		holds += " and the session secret that signs its voter tokens"
	}
	fmt.Fprintf(stderr, "took %s; it holds %s: keep it as you keep secrets\n", time.Since(start).Round(time.Millisecond), holds)
	return 0
}

// sessionSecretFile is the node's data-dir file of its session secret,
// which a backup carries when the node made it itself.
const sessionSecretFile = "session-secret"

// sessionSecretNote is what the operator must know, after a restore,
// about the secret that signed the voter tokens the replica issued, or ""
// when the backup carries it.
func sessionSecretNote(m backup.Manifest, from string) string {
	if _, err := os.Stat(filepath.Join(from, sessionSecretFile)); err == nil {
		return ""
	}
	if m.SessionSecret == backup.SessionSecretConfigured {
		return "the node signed voter tokens with --session-secret (or its file), which a backup does not carry: start the restored node with the same one as the cluster's other nodes, or the tokens voters hold are refused (session_invalid)\n"
	}
	return "this backup holds no session secret (it was taken before backups carried it): unless the node is started with the secret that signed its voter tokens (--session-secret-file, or that secret written to " + sessionSecretFile + " in the data dir before the start), it makes a new one, and the tokens voters hold are refused (session_invalid) until they get new ones\n"
}

// verifyBackup opens the backup's ledger read-only and verifies every
// poll's chains.
func verifyBackup(dir string) (polls int, records uint64, err error) {
	l, err := ledger.Open(ledger.Config{Dir: filepath.Join(dir, "ledger"), ReadOnly: true})
	if err != nil {
		return 0, 0, err
	}
	defer l.Close()
	ids, err := l.Polls()
	if err != nil {
		return 0, 0, err
	}
	for _, id := range ids {
		chains, err := ledger.VerifyChains(l.Scan(id))
		if err != nil {
			return 0, 0, fmt.Errorf("poll %s: %w", id, err)
		}
		for _, c := range chains {
			records += c.Records
		}
	}
	return len(ids), records, nil
}

// restoreMark is the ledger metadata entry that tells the node started on
// a restored data dir that its chains may be short of what its replica
// acknowledged after the backup: before it turns ready it completes them
// from their copies on the other full nodes, or stays unready saying what
// is missing. node/restore.go reads it (and sets "whole"); this package
// may not import the node's, so the name and fields are spelt twice.
const restoreMark = "node/restored"

// markRestored writes the restore mark into the restored ledger.
func markRestored(dataDir string, m backup.Manifest, now time.Time) error {
	l, err := ledger.Open(ledger.Config{Dir: filepath.Join(dataDir, "ledger")})
	if err != nil {
		return fmt.Errorf("cannot mark the restored ledger: %w", err)
	}
	b, err := json.Marshal(struct {
		BackupTakenAt int64 `json:"backup_taken_at"`
		RestoredAt    int64 `json:"restored_at"`
		Whole         bool  `json:"whole"`
	}{m.CreatedAt, now.UnixMilli(), false})
	if err == nil {
		err = l.PutMeta(restoreMark, b)
	}
	if cerr := l.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cannot mark the restored ledger: %w", err)
	}
	return nil
}

// ledgerRestore puts a backup into a new data dir and marks its ledger
// restored (markRestored). The node started on it is the backed-up
// replica again, so the command insists the original is gone for good:
// two live nodes with one replica id would fork its chains.
func ledgerRestore(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally ledger restore", "tally ledger restore --from BACKUP --data-dir DIR --original-is-gone")
	from := fs.String("from", "", "a backup directory written by tally ledger backup")
	dataDir := fs.String("data-dir", "", "the new node's data directory (must not exist, or be empty)")
	gone := fs.Bool("original-is-gone", false, "confirm that the node the backup came from is stopped for good and its data dir will never serve again")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *from == "" || *dataDir == "" || fs.NArg() > 0 {
		return usageError(fs, stderr, "--from and --data-dir are required")
	}
	m, err := backup.ReadManifest(*from)
	if err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 1
	}
	if !*gone {
		fmt.Fprintf(stderr, `tally ledger restore: the restored node will be replica %s again. Do this only when
the original node is stopped for good and its data dir will never serve again:
two nodes with one replica id would fork its hash chains. The votes it
acknowledged after the backup (%s) are not in it: before it turns ready, the
restored node completes its chains from their copies on its buddy, and stays
unready, saying which records are missing, while no copy of them answers.
If the original may come back, start a new node on an empty data dir instead,
and read the backup offline with "tally ledger export --data-dir %s --poll ID".
To go on, add --original-is-gone (see "Backups and restore" in
docs/operations.md).
`, m.Replica, time.UnixMilli(m.CreatedAt).UTC().Format(time.RFC3339), *from)
		return 2
	}
	if _, _, err := verifyBackup(*from); err != nil {
		fmt.Fprintf(stderr, "tally: the backup in %s does not verify: %v\n", *from, err)
		return 1
	}
	if _, err := backup.Restore(*from, *dataDir); err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 1
	}
	if err := os.Chmod(*dataDir, 0o700); err != nil {
		fmt.Fprintf(stderr, "tally: %v\n", err)
		return 1
	}
	if err := markRestored(*dataDir, m, time.Now()); err != nil {
		fmt.Fprintf(stderr, "tally: %v (remove %s before trying again)\n", err, *dataDir)
		return 1
	}
	fmt.Fprintf(stdout, "restored replica %s (region %s) into %s; start the node with --data-dir %s --region %s:\n"+
		"before it turns ready it completes its chains from their copies (the votes it acknowledged after the backup)\n",
		m.Replica, m.Region, *dataDir, *dataDir, m.Region)
	if note := sessionSecretNote(m, *from); note != "" {
		fmt.Fprint(stderr, "note: "+note)
	}
	return 0
}
