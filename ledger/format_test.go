package ledger

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble"
)

// setFormat writes a format number into the ledger at dir, as another
// release would have.
func setFormat(t *testing.T, dir string, f uint64) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(formatKey, binary.AppendUvarint(nil, f), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
}

// A ledger states its format; one without the key (an older release's)
// opens and is stated Format; one written in a later or too old format
// is refused with one line saying which release to run; a read-only open
// refuses alike and writes nothing.
func TestLedgerFormatIsStatedAndChecked(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir, Replica: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, closer, err := db.Get(formatKey)
	if err != nil {
		t.Fatalf("a new ledger states no format: %v", err)
	}
	if f, _ := binary.Uvarint(v); f != Format {
		t.Fatalf("a new ledger states format %d, want %d", f, Format)
	}
	closer.Close()
	// As written before the key existed.
	if err := db.Delete(formatKey, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	l, err = Open(Config{Dir: dir, Replica: "r1"})
	if err != nil {
		t.Fatalf("a ledger of the release before the format key: %v", err)
	}
	l.Close()

	for _, c := range []struct {
		f    uint64
		want string
	}{
		{Format + 1, "newer than this release reads"},
		{FormatMin - 1, "older than this release reads"},
	} {
		setFormat(t, dir, c.f)
		for _, ro := range []bool{false, true} {
			_, err := Open(Config{Dir: dir, Replica: "r1", ReadOnly: ro})
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("format %d (read-only %t): %v, want one line of ErrFormat saying %q", c.f, ro, err, c.want)
			}
		}
	}
	setFormat(t, dir, Format)
	l, err = Open(Config{Dir: dir, Replica: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}
