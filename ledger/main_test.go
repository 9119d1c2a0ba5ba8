package ledger

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openMem opens a ledger on fs (a fresh in-memory FS when nil).
func openMem(t testing.TB, fs vfs.FS, replica string) *Ledger {
	t.Helper()
	if fs == nil {
		fs = vfs.NewMem()
	}
	l, err := Open(Config{Dir: "db", FS: fs, Replica: replica})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// vote returns a valid vote record for Append.
func vote(poll, voter, option, idem string, wall int64) Record {
	return Record{Poll: poll, Voter: voter, Option: option, Idem: idem, Wall: wall, Trust: 1, Counted: true, IPHash: "ab12"}
}

func collect(t testing.TB, seq func(func(Record, error) bool)) []Record {
	t.Helper()
	var out []Record
	for r, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func idem(i int) string { return fmt.Sprintf("idem-%d", i) }

func runtimeGosched() { runtime.Gosched() }
