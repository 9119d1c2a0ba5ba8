package backup

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestRoundTrip(t *testing.T) {
	files := map[string]string{"replica-id": "eu-west-1a2b", "ledger/000001.log": "wal", "ledger/CURRENT": "MANIFEST-1\n", "empty": ""}
	root := writeTree(t, files)
	var buf bytes.Buffer
	m := Manifest{Replica: "eu-west-1a2b", Region: "eu-west", Node: "n1", CreatedAt: 42, Version: "v"}
	if err := Write(&buf, root, m); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "b")
	got, err := Extract(bytes.NewReader(buf.Bytes()), dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	m.Format = Format
	if got != m {
		t.Fatalf("manifest %+v, want %+v", got, m)
	}
	data := filepath.Join(t.TempDir(), "data")
	if _, err := Restore(dir, data); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		b, err := os.ReadFile(filepath.Join(data, name))
		if err != nil || string(b) != body {
			t.Fatalf("%s: %q, %v; want %q", name, b, err, body)
		}
		if st, _ := os.Stat(filepath.Join(data, name)); st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v, want 0600", name, st.Mode().Perm())
		}
	}
	if _, err := os.Stat(filepath.Join(data, ManifestFile)); !os.IsNotExist(err) {
		t.Fatal("restore copied the manifest into the data dir")
	}
	// Neither unpacks nor restores over something.
	if _, err := Extract(bytes.NewReader(buf.Bytes()), dir, 1<<20); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("extract into a full dir: %v", err)
	}
	if _, err := Restore(dir, data); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("restore into a full dir: %v", err)
	}
	if _, err := Restore(root, filepath.Join(t.TempDir(), "x")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("restore of a directory without a manifest: %v", err)
	}
}

func TestExtractTooLarge(t *testing.T) {
	root := writeTree(t, map[string]string{"big": string(make([]byte, 4096))})
	var buf bytes.Buffer
	if err := Write(&buf, root, Manifest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Extract(&buf, filepath.Join(t.TempDir(), "b"), 1000); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
}

// hostile builds a stream: a valid manifest, then the given entries.
func hostile(t testing.TB, entries ...tar.Header) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	man := []byte(`{"format":"` + Format + `"}`)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: ManifestFile, Size: int64(len(man)), Mode: 0o600})
	tw.Write(man)
	for _, h := range entries {
		tw.WriteHeader(&h)
		if h.Typeflag == tar.TypeReg && h.Size > 0 {
			tw.Write(make([]byte, h.Size))
		}
	}
	tw.Close()
	return buf.Bytes()
}

func TestExtractRefusesHostileEntries(t *testing.T) {
	for name, h := range map[string]tar.Header{
		"parent":       {Typeflag: tar.TypeReg, Name: "../evil", Size: 1},
		"deep parent":  {Typeflag: tar.TypeReg, Name: "ledger/../../evil", Size: 1},
		"absolute":     {Typeflag: tar.TypeReg, Name: "/etc/evil", Size: 1},
		"symlink":      {Typeflag: tar.TypeSymlink, Name: "link", Linkname: "/etc/passwd"},
		"hard link":    {Typeflag: tar.TypeLink, Name: "link", Linkname: "replica-id"},
		"device":       {Typeflag: tar.TypeChar, Name: "dev"},
		"backslash":    {Typeflag: tar.TypeReg, Name: `..\evil`, Size: 1},
		"manifest dup": {Typeflag: tar.TypeReg, Name: ManifestFile, Size: 1},
		"dot":          {Typeflag: tar.TypeDir, Name: "./"},
	} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			_, err := Extract(bytes.NewReader(hostile(t, h)), filepath.Join(parent, "b"), 1<<20)
			if err == nil {
				t.Fatal("extracted")
			}
			if _, err := os.Stat(filepath.Join(parent, "evil")); err == nil {
				t.Fatal("a file landed outside the target")
			}
		})
	}
	// No manifest first, garbage, nothing.
	for name, stream := range map[string][]byte{"empty": nil, "garbage": []byte("not a tar stream at all, no")} {
		if _, err := Extract(bytes.NewReader(stream), filepath.Join(t.TempDir(), "b"), 1<<20); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s: got %v, want ErrMalformed", name, err)
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "replica-id", Size: 1, Mode: 0o600})
	tw.Write([]byte("x"))
	tw.Close()
	if _, err := Extract(&buf, filepath.Join(t.TempDir(), "b"), 1<<20); !errors.Is(err, ErrMalformed) {
		t.Fatalf("no manifest first: got %v", err)
	}
}

func FuzzExtract(f *testing.F) {
	f.Add(hostile(f, tar.Header{Typeflag: tar.TypeReg, Name: "ledger/CURRENT", Size: 3}))
	f.Add(hostile(f, tar.Header{Typeflag: tar.TypeReg, Name: "../x", Size: 3}))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		parent, err := os.MkdirTemp("", "fuzz-extract")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(parent)
		dir := filepath.Join(parent, "b")
		Extract(bytes.NewReader(stream), dir, 1<<16)
		// Whatever happened, nothing is outside dir.
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if e.Name() != "b" {
				t.Fatalf("extract wrote %s outside the target", e.Name())
			}
		}
	})
}
