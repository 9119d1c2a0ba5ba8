package node

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"tally/api"
	"tally/internal/backup"
	"tally/internal/buildinfo"
)

// backupPrefix names the scratch directories GET /v1/backup builds its
// checkpoint in, inside the data dir (so Pebble can hard-link its tables);
// a node that crashed mid-backup removes them at start.
const backupPrefix = "backup-tmp-"

// backupFiles are the data dir's files a backup carries besides the
// ledger: what makes the replica itself, and the session secret the node
// made there when it was given none (--session-secret), so that the voter
// tokens it signed are still good once the backup is restored. The admin
// token is left out (a new one is made, or --admin-token-file given), and
// so is the vote-state checkpoint (it may be newer than the ledger copy;
// the restored node replays the ledger instead).
var backupFiles = []string{replicaIDFile, signingKeyFile, hlcFile, ipSaltFile, sessionSecretFile}

// handleBackup serves GET /v1/backup (admin): a tar stream of a Pebble
// checkpoint of the ledger, taken while the node keeps taking votes, and
// the replica's identity files. One backup runs at a time.
func (n *Node) handleBackup(w http.ResponseWriter, r *http.Request) {
	if !n.backupMu.TryLock() {
		e := api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "a backup is already running on this node")
		e.RetryAfter = 5 * time.Second
		api.WriteError(w, r, e)
		return
	}
	defer n.backupMu.Unlock()
	start := time.Now()
	tmp, err := n.prepareBackup()
	if tmp != "" {
		defer os.RemoveAll(tmp)
	}
	if err != nil {
		n.m.backups.WithLabelValues("failed").Inc()
		n.log.Error("backup failed", "err", err)
		api.WriteError(w, r, err)
		return
	}
	created := n.cfg.Now()
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="tally-%s-%s.tar"`, n.replica, created.UTC().Format("20060102T150405Z")))
	w.Header().Set("Cache-Control", "no-store")
	m := backup.Manifest{Replica: n.replica, Region: n.cfg.Region, Node: n.cfg.NodeName, CreatedAt: created.UnixMilli(), Version: buildinfo.Read().String(),
		SessionSecret: backup.SessionSecretInBackup}
	if n.cfg.SessionSecret != "" {
		m.SessionSecret = backup.SessionSecretConfigured // a file of the data dir's, if any, is not the one in use
	}
	if err := backup.Write(w, tmp, m); err != nil {
		// The status line is sent: the client sees a cut tar stream.
		n.m.backups.WithLabelValues("failed").Inc()
		n.log.Error("backup stream failed", "err", err)
		return
	}
	n.m.backups.WithLabelValues("ok").Inc()
	n.m.backupSeconds.Observe(time.Since(start).Seconds())
	n.log.Info("backup served", "took", time.Since(start).Round(time.Millisecond), "remote", r.RemoteAddr)
}

// prepareBackup checkpoints the ledger and copies the identity files into
// a scratch directory, returned for the caller to remove.
func (n *Node) prepareBackup() (string, error) {
	tmp, err := os.MkdirTemp(n.cfg.DataDir, backupPrefix)
	if err != nil {
		return "", fmt.Errorf("node: backup: %w", err)
	}
	if err := n.ledger.Checkpoint(filepath.Join(tmp, ledgerDir)); err != nil {
		return tmp, fmt.Errorf("node: backup: %w", err)
	}
	for _, name := range backupFiles {
		if name == sessionSecretFile && n.cfg.SessionSecret != "" {
			continue // not the secret in use (--session-secret is): the restored node is given that one again
		}
		if err := backup.CopyFile(filepath.Join(n.cfg.DataDir, name), filepath.Join(tmp, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return tmp, fmt.Errorf("node: backup: %w", err)
		}
	}
	return tmp, nil
}

// removeBackupLeftovers removes scratch directories a crash mid-backup
// left in the data dir.
func removeBackupLeftovers(dataDir string) error {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), backupPrefix) {
			if err := os.RemoveAll(filepath.Join(dataDir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
