package backup

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Format names this layout in the manifest.
const Format = "tally-backup-1"

// ManifestFile is the manifest's name in a backup.
const ManifestFile = "BACKUP.json"

// Manifest describes a backup.
type Manifest struct {
	Format    string `json:"format"`
	Replica   string `json:"replica"`
	Region    string `json:"region"`
	Node      string `json:"node"`
	CreatedAt int64  `json:"created_at"` // Unix ms, by the node's clock
	Version   string `json:"version"`    // the node's build
	// SessionSecret says where the secret signing the node's voter tokens
	// was: SessionSecretInBackup (its data dir's, carried here) or
	// SessionSecretConfigured (--session-secret or its file, not carried:
	// the restored node needs it again). Empty in backups made before
	// backups carried it.
	SessionSecret string `json:"session_secret,omitempty"`
}

// Where a backed-up node's session secret was (Manifest.SessionSecret).
const (
	SessionSecretInBackup   = "in_backup"
	SessionSecretConfigured = "configured"
)

var (
	// ErrMalformed is returned for a stream that is not a backup or breaks
	// the rules above.
	ErrMalformed = errors.New("backup: malformed")
	// ErrTooLarge is returned when a stream exceeds the size cap.
	ErrTooLarge = errors.New("backup: too large")
	// ErrNotEmpty is returned when the target directory holds anything.
	ErrNotEmpty = errors.New("backup: target directory is not empty")
)

// Write writes the manifest and then every regular file under root, in
// lexical order, as a tar stream.
func Write(w io.Writer, root string, m Manifest) error {
	tw := tar.NewWriter(w)
	m.Format = Format
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFile(tw, ManifestFile, int64(len(mb)), strings.NewReader(string(mb))); err != nil {
		return err
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o700, ModTime: time.Unix(0, 0)})
		}
		if !d.Type().IsRegular() {
			return nil // Pebble writes no links; a stray one is left out
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		return writeFile(tw, name, st.Size(), f)
	})
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return tw.Close()
}

func writeFile(tw *tar.Writer, name string, size int64, r io.Reader) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o600, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	// A file that grew since its Stat is cut at the size announced (Pebble
	// does not change files once in a checkpoint; this is a guard).
	if _, err := io.CopyN(tw, r, size); err != nil {
		return fmt.Errorf("backup: %s: %w", name, err)
	}
	return nil
}

// Extract unpacks a backup stream into dir, which must be absent or
// empty, refusing more than maxBytes of file content. On error dir may
// hold part of the backup; the caller removes it.
func Extract(r io.Reader, dir string, maxBytes int64) (Manifest, error) {
	var m Manifest
	if err := emptyDir(dir); err != nil {
		return m, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return m, err
	}
	tr := tar.NewReader(r)
	var total int64
	for i := 0; ; i++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		name, err := cleanName(h.Name)
		if err != nil {
			return m, err
		}
		if i == 0 {
			if name != ManifestFile || h.Typeflag != tar.TypeReg || h.Size > 1<<16 {
				return m, fmt.Errorf("%w: the stream does not start with %s", ErrMalformed, ManifestFile)
			}
			if err := json.NewDecoder(io.LimitReader(tr, h.Size)).Decode(&m); err != nil || m.Format != Format {
				return m, fmt.Errorf("%w: %s is not a %s manifest", ErrMalformed, ManifestFile, Format)
			}
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o700); err != nil {
				return m, err
			}
		case tar.TypeReg:
			if total += h.Size; h.Size < 0 || total > maxBytes {
				return m, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxBytes)
			}
			if i == 0 {
				// The manifest was read above; write it as it was announced.
				b, _ := json.MarshalIndent(m, "", "  ")
				if err := os.WriteFile(target, b, 0o600); err != nil {
					return m, err
				}
				continue
			}
			if err := extractFile(tr, target, h.Size); err != nil {
				return m, err
			}
		default:
			return m, fmt.Errorf("%w: %s is not a regular file or directory", ErrMalformed, name)
		}
	}
	if m.Format == "" {
		return m, fmt.Errorf("%w: empty stream", ErrMalformed)
	}
	return m, nil
}

// CopyFile copies the regular file from into to, which must not exist,
// with mode 0600, fsynced.
func CopyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	return extractFile(src, to, st.Size())
}

func extractFile(r io.Reader, target string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err) // a name twice, most likely
	}
	if _, err := io.CopyN(f, r, size); err != nil {
		f.Close()
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// cleanName refuses names that could land outside the target.
func cleanName(name string) (string, error) {
	clean := path.Clean(strings.TrimSuffix(name, "/"))
	if name == "" || path.IsAbs(name) || strings.Contains(name, "\\") || clean == "." ||
		clean == ".." || strings.HasPrefix(clean, "../") || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: entry name %q", ErrMalformed, name)
	}
	return clean, nil
}

// emptyDir returns nil when dir is absent or empty, ErrNotEmpty otherwise.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%w: %s", ErrNotEmpty, dir)
	}
	return nil
}

// ReadManifest reads the manifest of an unpacked backup.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return m, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Format != Format {
		return m, fmt.Errorf("%w: %s is not a %s manifest", ErrMalformed, ManifestFile, Format)
	}
	return m, nil
}

// Restore copies an unpacked backup into dataDir, which must be absent or
// empty, leaving out the manifest. The node started on dataDir is the
// backed-up replica again: see "Backups and restore" in
// docs/operations.md for when that is safe.
func Restore(from, dataDir string) (Manifest, error) {
	m, err := ReadManifest(from)
	if err != nil {
		return m, err
	}
	if err := emptyDir(dataDir); err != nil {
		return m, err
	}
	err = filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil || rel == ManifestFile {
			return err
		}
		target := filepath.Join(dataDir, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%w: %s is not a regular file", ErrMalformed, rel)
		}
		return CopyFile(p, target)
	})
	if err != nil {
		return m, fmt.Errorf("backup: restore: %w", err)
	}
	return m, nil
}
