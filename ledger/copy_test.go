package ledger

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// intoLedger copies into a second ledger by Import, as a buddy's store
// does (package buddy), and fails while down is set.
type intoLedger struct {
	to    *Ledger
	mu    sync.Mutex
	down  error
	calls [][]Record
}

func (c *intoLedger) Copy(recs []Record) error {
	c.mu.Lock()
	down := c.down
	c.calls = append(c.calls, slices.Clone(recs))
	c.mu.Unlock()
	if down != nil {
		return down
	}
	_, err := c.to.Import(RecordsOf(recs))
	return err
}

// An append returns once its records are in the copy; a failed copy
// returns ErrNotCopied with the records ledgered all the same, and their
// retry copies them before it is answered.
func TestAppendWaitsForTheCopy(t *testing.T) {
	buddy := openMem(t, nil, "")
	cp := &intoLedger{to: buddy}
	l, err := Open(Config{Dir: "db", FS: vfs.NewMem(), Replica: "eu-1", Copier: cp})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(vote("p", "v1", "red", "k1", 10), vote("p", "v2", "red", "k2", 11)); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := buddy.Head("p", "eu-1"); n != 2 || !l.Copied("p", VoteID{"eu-1", 2}) {
		t.Fatalf("after the append the copy holds %d records, Copied %v", n, l.Copied("p", VoteID{"eu-1", 2}))
	}

	cp.mu.Lock()
	cp.down = errors.New("no buddy")
	cp.mu.Unlock()
	out, err := l.Append(vote("p", "v3", "blue", "k3", 12))
	if !errors.Is(err, ErrNotCopied) || len(out) != 1 || out[0].ID != (VoteID{"eu-1", 3}) {
		t.Fatalf("with the copy down: %+v, %v; want vote 3 and ErrNotCopied", out, err)
	}
	if id, ok, _ := l.Lookup("p", "k3"); !ok || id.Seq != 3 || l.Copied("p", id) {
		t.Fatalf("the uncopied vote: found %v %v, copied %v", id, ok, l.Copied("p", id))
	}

	cp.mu.Lock()
	cp.down = nil
	cp.mu.Unlock()
	out, err = l.Append(vote("p", "v3", "blue", "k3", 13), vote("p", "v4", "gold", "k4", 14))
	if err != nil || !out[0].Duplicate || out[0].ID.Seq != 3 || out[1].ID.Seq != 4 {
		t.Fatalf("the retry and a new vote: %+v, %v", out, err)
	}
	if n, _, _ := buddy.Head("p", "eu-1"); n != 4 || !l.Copied("p", VoteID{"eu-1", 3}) {
		t.Fatalf("after the retry the copy holds %d records, Copied(3) %v", n, l.Copied("p", VoteID{"eu-1", 3}))
	}
	last := cp.calls[len(cp.calls)-1]
	if len(last) != 2 || last[0].Seq != 3 || last[1].Seq != 4 {
		t.Fatalf("the last copy: %d records %v", len(last), last)
	}
	// Other replicas' ids, and every id of a ledger without a copier, need no copy.
	if !l.Copied("p", VoteID{"us-1", 99}) || !openMem(t, nil, "eu-1").Copied("p", VoteID{"eu-1", 1}) {
		t.Fatal("an id that needs no copy is not Copied")
	}
}
