package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// damagedLedger writes n votes (one synced batch each) to a ledger on disk,
// closes it and returns its directory and newest write-ahead log.
func damagedLedger(t *testing.T, n int) (dir, wal string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "ledger")
	l, err := Open(Config{Dir: dir, Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := l.Append(vote("p", fmt.Sprintf("v%d", i), "red", fmt.Sprintf("k%d", i), int64(1000+i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) == 0 {
		t.Fatal("no write-ahead log")
	}
	return dir, logs[len(logs)-1]
}

// validEnd is where the WAL's valid chunks end (the rest is preallocated).
func validEnd(t *testing.T, wal string) int {
	data, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	var num uint64
	fmt.Sscanf(filepath.Base(wal), "%d.log", &num)
	end := firstBadChunk(data, uint32(num))
	if end < 0 {
		end = len(data)
	}
	return end
}

func countRecords(t *testing.T, l *Ledger) int {
	t.Helper()
	n := 0
	for _, err := range l.Scan("p") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// A byte flipped in the middle of the write-ahead log would make Pebble
// drop every synced record after it and the ledger reuse their sequence
// numbers; the ledger refuses to open instead, read-write and read-only,
// and changes nothing in the directory.
func TestDamagedWALInTheMiddleIsRefused(t *testing.T) {
	dir, wal := damagedLedger(t, 200)
	data, _ := os.ReadFile(wal)
	mid := validEnd(t, wal) / 2
	data[mid] ^= 0x40
	if err := os.WriteFile(wal, data, 0o600); err != nil {
		t.Fatal(err)
	}
	before := listing(t, dir)
	for _, ro := range []bool{false, true} {
		l, err := Open(Config{Dir: dir, Replica: "eu-1", ReadOnly: ro})
		var de *DamageError
		if !errors.As(err, &de) || !errors.Is(err, ErrDamaged) {
			if l != nil {
				l.Close()
			}
			t.Fatalf("read-only %v: opened a WAL damaged at byte %d: %v", ro, mid, err)
		}
		if de.Offset > int64(mid) || de.NextValid <= de.Offset || !strings.Contains(err.Error(), filepath.Base(wal)) {
			t.Fatalf("damage reported at %d (next valid %d), flipped %d: %v", de.Offset, de.NextValid, mid, err)
		}
	}
	if after := listing(t, dir); after != before {
		t.Fatalf("refusing to open changed the directory:\n%s\nvs\n%s", before, after)
	}
}

// A torn tail (a crash during the last, unsynced write) is what Pebble's
// recovery is for: the ledger opens with every record before the tear.
func TestTornWALTailOpens(t *testing.T) {
	for _, cut := range []int{1, 5, 11, 40} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			dir, wal := damagedLedger(t, 50)
			end := validEnd(t, wal)
			if err := os.Truncate(wal, int64(end-cut)); err != nil {
				t.Fatal(err)
			}
			for _, ro := range []bool{true, false} {
				l, err := Open(Config{Dir: dir, Replica: "eu-1", ReadOnly: ro})
				if err != nil {
					t.Fatalf("read-only %v: a torn tail refused: %v", ro, err)
				}
				if n := countRecords(t, l); n != 49 {
					t.Fatalf("read-only %v: %d records after tearing the last one", ro, n)
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// Read-only opens create nothing: a missing directory is ErrNotExist, and
// an existing ledger's files are left as they were.
func TestReadOnlyOpenChangesNothing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo")
	if _, err := Open(Config{Dir: missing, ReadOnly: true}); !errors.Is(err, ErrNotExist) {
		t.Fatalf("read-only open of a missing dir: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only open created %s", missing)
	}
	dir, _ := damagedLedger(t, 10)
	before := listing(t, dir)
	l, err := Open(Config{Dir: dir, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := countRecords(t, l); n != 10 {
		t.Fatalf("records: %d", n)
	}
	if _, err := l.Append(vote("p", "v", "red", "k", 1)); !errors.Is(err, ErrReadOnly) && !errors.Is(err, ErrNoReplica) {
		t.Fatalf("append on a read-only ledger: %v", err)
	}
	l.Close()
	l.Close()
	if after := listing(t, dir); after != before {
		t.Fatalf("a read-only open changed the directory:\n%s\nvs\n%s", before, after)
	}
}

// FuzzCheckWAL: whatever bytes the newest WAL holds, the check returns
// without panicking, and a clean log passes.
func FuzzCheckWAL(f *testing.F) {
	f.Add([]byte{}, uint16(0))
	f.Add(make([]byte, 64), uint16(3))
	f.Fuzz(func(t *testing.T, data []byte, flip uint16) {
		fs := vfs.NewMem()
		if err := fs.MkdirAll("d", 0o755); err != nil {
			t.Fatal(err)
		}
		w, _ := fs.Create("d/000002.log")
		w.Write(data)
		w.Close()
		err := checkWAL(fs, "d")
		if err != nil && !errors.Is(err, ErrDamaged) {
			t.Fatalf("unexpected error: %v", err)
		}
	})
}

// listing names every file of dir with its size and modification time,
// but for Pebble's LOCK file, which every open takes (read-only too).
func listing(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		if e.Name() == "LOCK" {
			continue
		}
		info, _ := e.Info()
		fmt.Fprintf(&b, "%s %d %v\n", e.Name(), info.Size(), info.ModTime().UnixNano())
	}
	return b.String()
}

// Metadata calls after Close (gossip and the certifier make them from
// goroutines of their own) return ErrClosed; Pebble would panic.
func TestMetaAfterCloseIsAnError(t *testing.T) {
	l := openMem(t, nil, "eu-1")
	if err := l.PutMeta("x", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.PutMeta("y", []byte("2")); !errors.Is(err, ErrClosed) {
		t.Fatalf("PutMeta after Close: %v", err)
	}
	if _, _, err := l.Meta("x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Meta after Close: %v", err)
	}
	for range l.MetaWithPrefix("") {
		t.Fatal("MetaWithPrefix after Close yielded")
	}
}

// A batch of unsynced metadata is there after a reopen, a range delete
// takes exactly its range, and both are ErrClosed after Close.
func TestMetaBatchAndRange(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir, Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.PutMetaBatch([]string{"b/1", "b/2", "b/3", "c/1"}, [][]byte{{1}, {2}, {3}, {4}}, false); err != nil {
		t.Fatal(err)
	}
	if err := l.PutMetaBatch([]string{"x"}, nil, false); err == nil {
		t.Fatal("a batch of 1 name and 0 values was taken")
	}
	if err := l.DeleteMetaRange("b/1", "b/3"); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if l, err = Open(Config{Dir: dir, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var got []string
	for name, v := range l.MetaWithPrefix("") {
		got = append(got, fmt.Sprintf("%s=%d", name, v[0]))
	}
	if strings.Join(got, " ") != "b/3=3 c/1=4" {
		t.Fatalf("after a reopen: %v", got)
	}
	l2 := openMem(t, nil, "eu-1")
	l2.Close()
	if err := l2.PutMetaBatch([]string{"a"}, [][]byte{{1}}, false); !errors.Is(err, ErrClosed) {
		t.Fatalf("PutMetaBatch after Close: %v", err)
	}
	if err := l2.DeleteMetaRange("a", "b"); !errors.Is(err, ErrClosed) {
		t.Fatalf("DeleteMetaRange after Close: %v", err)
	}
}
