package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tally/api"
)

// scratchPrefix names the scratch directories a backup is built in,
// inside the data dir (so Pebble can hard-link its tables); a node that
// crashed mid-backup removes them at start (RemoveLeftovers).
const scratchPrefix = "backup-tmp-"

// Server serves GET /v1/backup: a tar stream of a checkpoint of the
// ledger, taken while the node keeps taking votes, and the replica's
// identity files. One backup runs at a time; a second is 503.
type Server struct {
	DataDir    string                 // the node's data dir
	LedgerDir  string                 // the ledger's name in it, and in the backup
	Files      []string               // the data dir's files carried besides the ledger, if present
	Checkpoint func(dir string) error // writes the ledger's checkpoint at dir
	Manifest   func(now time.Time) Manifest
	Now        func() time.Time
	Log        *slog.Logger

	mu      sync.Mutex
	results *prometheus.CounterVec
	seconds prometheus.Histogram
}

// Collectors are the server's metrics, for the node to register.
func (s *Server) Collectors() []prometheus.Collector {
	if s.results == nil {
		s.results = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_backups_total", Help: "Backups served (GET /v1/backup), by result: ok or failed.",
		}, []string{"result"})
		s.seconds = prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tally_backup_duration_seconds", Help: "Time to checkpoint the ledger and stream a backup.",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 10),
		})
	}
	return []prometheus.Collector{s.results, s.seconds}
}

// ServeHTTP streams one backup.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.mu.TryLock() {
		e := api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "a backup is already running on this node")
		e.RetryAfter = 5 * time.Second
		api.WriteError(w, r, e)
		return
	}
	defer s.mu.Unlock()
	start := time.Now()
	tmp, err := s.prepare()
	if tmp != "" {
		defer os.RemoveAll(tmp)
	}
	if err != nil {
		s.count("failed")
		s.Log.Error("backup failed", "err", err)
		api.WriteError(w, r, err)
		return
	}
	m := s.Manifest(s.Now())
	created := time.UnixMilli(m.CreatedAt).UTC()
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="tally-%s-%s.tar"`, m.Replica, created.Format("20060102T150405Z")))
	w.Header().Set("Cache-Control", "no-store")
	if err := Write(w, tmp, m); err != nil {
		// The status line is sent: the client sees a cut tar stream.
		s.count("failed")
		s.Log.Error("backup stream failed", "err", err)
		return
	}
	s.count("ok")
	if s.seconds != nil {
		s.seconds.Observe(time.Since(start).Seconds())
	}
	s.Log.Info("backup served", "took", time.Since(start).Round(time.Millisecond), "remote", r.RemoteAddr)
}

func (s *Server) count(result string) {
	if s.results != nil {
		s.results.WithLabelValues(result).Inc()
	}
}

// prepare checkpoints the ledger and copies the identity files into a
// scratch directory, returned for the caller to remove.
func (s *Server) prepare() (string, error) {
	tmp, err := os.MkdirTemp(s.DataDir, scratchPrefix)
	if err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	if err := s.Checkpoint(filepath.Join(tmp, s.LedgerDir)); err != nil {
		return tmp, fmt.Errorf("backup: %w", err)
	}
	for _, name := range s.Files {
		if err := CopyFile(filepath.Join(s.DataDir, name), filepath.Join(tmp, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return tmp, fmt.Errorf("backup: %w", err)
		}
	}
	return tmp, nil
}

// RemoveLeftovers removes the scratch directories a crash mid-backup left
// in dataDir.
func RemoveLeftovers(dataDir string) error {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), scratchPrefix) {
			if err := os.RemoveAll(filepath.Join(dataDir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
