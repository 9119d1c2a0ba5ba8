package ledger

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
)

func uniqueSorted(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// interner returns one shared string for repeated poll and replica ids, so
// a long scan does not hold a copy per record.
type interner struct{ last []string }

func (in *interner) get(s string) string {
	for _, v := range in.last {
		if v == s {
			return v
		}
	}
	if len(in.last) >= 8 {
		in.last = in.last[1:]
	}
	in.last = append(in.last, s)
	return s
}

// pebbleLogger sends Pebble's log lines to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error("pebble fatal: " + fmt.Sprintf(format, args...))
	panic(fmt.Sprintf(format, args...))
}

// countingFS counts fsyncs of write-ahead log files, so benchmarks can say
// how many records share one fsync.
type countingFS struct {
	vfs.FS
	walSyncs atomic.Uint64
}

func (fs *countingFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &countingFile{File: f, n: &fs.walSyncs}, nil
}

func (fs *countingFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	return fs.wrap(name, f, err)
}

func (fs *countingFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname)
	return fs.wrap(newname, f, err)
}

type countingFile struct {
	vfs.File
	n *atomic.Uint64
}

func (f *countingFile) Sync() error     { f.n.Add(1); return f.File.Sync() }
func (f *countingFile) SyncData() error { f.n.Add(1); return f.File.SyncData() }
func (f *countingFile) SyncTo(length int64) (bool, error) {
	f.n.Add(1)
	return f.File.SyncTo(length)
}

// makeDirDurable creates dir and fsyncs its parent, so a fresh ledger
// directory survives a crash right after Open.
func makeDirDurable(fs vfs.FS, dir string) error {
	if _, err := fs.Stat(dir); err == nil {
		return nil
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	parent, err := fs.OpenDir(fs.PathDir(dir))
	if err != nil {
		return err
	}
	defer parent.Close()
	return parent.Sync()
}

// openPebble opens the Pebble database, naming the cause of the usual
// failures in one line (Pebble panics on some of them).
func openPebble(dir string, opts *pebble.Options) (db *pebble.DB, err error) {
	defer func() {
		if v := recover(); v != nil {
			db, err = nil, fmt.Errorf("ledger: cannot open %s: %v", dir, v)
		}
	}()
	db, err = pebble.Open(dir, opts)
	switch {
	case errors.Is(err, pebble.ErrDBDoesNotExist):
		return nil, fmt.Errorf("%w: %s holds no ledger", ErrNotExist, dir)
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK):
		return nil, fmt.Errorf("%w: %s is in use by another process%s: a running node holds its data dir", ErrLocked, dir, lockHolder(dir))
	case err != nil && strings.Contains(err.Error(), "lock held by current process"):
		return nil, fmt.Errorf("%w: %s is in use: this process has it open already", ErrLocked, dir)
	case err != nil:
		return nil, fmt.Errorf("ledger: cannot open %s: %w", dir, err)
	}
	if err := checkFormat(db, dir, opts.ReadOnly); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// ErrLocked is returned when another process holds the ledger open.
var ErrLocked = errors.New("ledger: locked")

// lockHolder names the process holding dir's LOCK file, as " (pid N,
// NAME)", by looking for it among /proc's open files (Linux; elsewhere, or
// when it cannot be seen, "").
func lockHolder(dir string) string {
	lock, err := filepath.Abs(filepath.Join(dir, "LOCK"))
	if err != nil {
		return ""
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && target == lock {
			pid := strings.Split(fd, "/")[2]
			if pid == strconv.Itoa(os.Getpid()) {
				continue
			}
			name, _ := os.ReadFile("/proc/" + pid + "/comm")
			return fmt.Sprintf(" (pid %s, %s)", pid, strings.TrimSpace(string(name)))
		}
	}
	return ""
}
