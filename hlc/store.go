package hlc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FileStore keeps the high-water mark in a small text file, replaced
// atomically (write, fsync, rename, fsync the directory) on every Save.
type FileStore struct {
	Path string
}

var _ Store = FileStore{}

// Load returns the stored mark, or 0 when the file does not exist yet.
func (s FileStore) Load() (int64, error) {
	b, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%w: %s holds %q", ErrMalformed, s.Path, b)
	}
	return v, nil
}

// Save durably replaces the stored mark.
func (s FileStore) Save(wallMs int64) error {
	tmp := s.Path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.FormatInt(wallMs, 10) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, s.Path); err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(s.Path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}
