package node

import (
	"time"

	"tally/internal/backup"
	"tally/internal/buildinfo"
)

// backupFiles are the data dir's files a backup carries besides the
// ledger: what makes the replica itself, and the session secret the node
// made there when it was given none (--session-secret), so that the voter
// tokens it signed are still good once the backup is restored. The admin
// token is left out (a new one is made, or --admin-token-file given), and
// so is the vote-state checkpoint (it may be newer than the ledger copy;
// the restored node replays the ledger instead).
var backupFiles = []string{replicaIDFile, signingKeyFile, hlcFile, ipSaltFile, sessionSecretFile}

// backupServer serves GET /v1/backup (internal/backup) from this node's
// ledger and data dir.
func (n *Node) backupServer() *backup.Server {
	files := backupFiles
	if n.cfg.SessionSecret != "" {
		// The data dir's secret, if any, is not the one in use
		// (--session-secret is): the restored node is given that one again.
		files = nil
		for _, f := range backupFiles {
			if f != sessionSecretFile {
				files = append(files, f)
			}
		}
	}
	return &backup.Server{
		DataDir: n.cfg.DataDir, LedgerDir: ledgerDir, Files: files,
		Checkpoint: n.ledger.Checkpoint,
		Manifest: func(now time.Time) backup.Manifest {
			m := backup.Manifest{Replica: n.replica, Region: n.cfg.Region, Node: n.cfg.NodeName, CreatedAt: now.UnixMilli(),
				Version: buildinfo.Read().String(), SessionSecret: backup.SessionSecretInBackup}
			if n.cfg.SessionSecret != "" {
				m.SessionSecret = backup.SessionSecretConfigured
			}
			return m
		},
		Now: n.cfg.Now, Log: n.log,
	}
}
