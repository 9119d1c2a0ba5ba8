package ledger

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"tally/internal/testwait"
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
	if n, _, _ := buddy.Head("p", "eu-1"); n != 2 || !copiedNow(l, "p", VoteID{"eu-1", 2}) {
		t.Fatalf("after the append the copy holds %d records, Copied %v", n, copiedNow(l, "p", VoteID{"eu-1", 2}))
	}

	cp.mu.Lock()
	cp.down = errors.New("no buddy")
	cp.mu.Unlock()
	out, err := l.Append(vote("p", "v3", "blue", "k3", 12))
	if !errors.Is(err, ErrNotCopied) || len(out) != 1 || out[0].ID != (VoteID{"eu-1", 3}) {
		t.Fatalf("with the copy down: %+v, %v; want vote 3 and ErrNotCopied", out, err)
	}
	if id, ok, _ := l.Lookup("p", "k3"); !ok || id.Seq != 3 || copiedNow(l, "p", id) {
		t.Fatalf("the uncopied vote: found %v %v, copied %v", id, ok, copiedNow(l, "p", id))
	}

	cp.mu.Lock()
	cp.down = nil
	cp.mu.Unlock()
	out, err = l.Append(vote("p", "v3", "blue", "k3", 13), vote("p", "v4", "gold", "k4", 14))
	if err != nil || !out[0].Duplicate || out[0].ID.Seq != 3 || out[1].ID.Seq != 4 {
		t.Fatalf("the retry and a new vote: %+v, %v", out, err)
	}
	if n, _, _ := buddy.Head("p", "eu-1"); n != 4 || !copiedNow(l, "p", VoteID{"eu-1", 3}) {
		t.Fatalf("after the retry the copy holds %d records, Copied(3) %v", n, copiedNow(l, "p", VoteID{"eu-1", 3}))
	}
	last := cp.calls[len(cp.calls)-1]
	if len(last) != 2 || last[0].Seq != 3 || last[1].Seq != 4 {
		t.Fatalf("the last copy: %d records %v", len(last), last)
	}
	// Other replicas' ids, and every id of a ledger without a copier, need no copy.
	if !copiedNow(l, "p", VoteID{"us-1", 99}) || !copiedNow(openMem(t, nil, "eu-1"), "p", VoteID{"eu-1", 1}) {
		t.Fatal("an id that needs no copy is not Copied")
	}
}

// copiedNow says whether the ledger knows id to be on a second machine,
// without copying it (EnsureCopied would).
func copiedNow(l *Ledger, poll string, id VoteID) bool {
	return l.copies == nil || id.Replica != l.replica || l.copies.has(poll, id)
}

// EnsureCopied copies an id not known to be copied — after a failed copy,
// or after a restart, whose marks start at zero — and fails with
// ErrNotCopied while the second machine is away; an id known copied, or
// another replica's, costs no copy.
func TestEnsureCopiedCopiesWhatIsNotKnownCopied(t *testing.T) {
	buddy := openMem(t, nil, "")
	cp := &intoLedger{to: buddy}
	fs := vfs.NewMem()
	l, err := Open(Config{Dir: "db", FS: fs, Replica: "eu-1", Copier: cp})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(vote("p", "v1", "red", "k1", 10), vote("p", "v2", "red", "k2", 11)); err != nil {
		t.Fatal(err)
	}
	calls := len(cp.calls)
	if err := l.EnsureCopied("p", VoteID{"eu-1", 2}); err != nil || len(cp.calls) != calls {
		t.Fatalf("an id known copied: %v, %d copies more", err, len(cp.calls)-calls)
	}
	if err := l.EnsureCopied("p", VoteID{"us-1", 7}); err != nil || len(cp.calls) != calls {
		t.Fatalf("another replica's id: %v, %d copies more", err, len(cp.calls)-calls)
	}
	l.Close()
	if l, err = Open(Config{Dir: "db", FS: fs, Replica: "eu-1", Copier: cp}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cp.mu.Lock()
	cp.down = errors.New("no buddy")
	cp.mu.Unlock()
	if err := l.EnsureCopied("p", VoteID{"eu-1", 1}); !errors.Is(err, ErrNotCopied) {
		t.Fatalf("after a restart with the copy down: %v, want ErrNotCopied", err)
	}
	cp.mu.Lock()
	cp.down = nil
	cp.mu.Unlock()
	if err := l.EnsureCopied("p", VoteID{"eu-1", 1}); err != nil || !copiedNow(l, "p", VoteID{"eu-1", 1}) {
		t.Fatalf("with the copy back: %v, known copied %v", err, copiedNow(l, "p", VoteID{"eu-1", 1}))
	}
	if got := cp.calls[len(cp.calls)-1]; len(got) != 1 || got[0].Seq != 1 || got[0].Idem != "k1" {
		t.Fatalf("the copy sent %v, want record 1", got)
	}
	if err := l.EnsureCopied("p", VoteID{"eu-1", 9}); !errors.Is(err, ErrNotCopied) {
		t.Fatalf("an id the ledger does not hold: %v", err)
	}
}

// gatedCopier holds every Copy until its gate opens, and counts the calls.
type gatedCopier struct {
	gate, entered chan struct{}
	mu            sync.Mutex
	calls         [][]Record
}

func (c *gatedCopier) Copy(recs []Record) error {
	select {
	case c.entered <- struct{}{}:
	default:
	}
	<-c.gate
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, slices.Clone(recs))
	return nil
}

// The batches synced while a copy is in flight go in the next copy
// together: one round trip and one fsync on the second machine for all.
func TestBatchesWaitingForACopyGoInOne(t *testing.T) {
	cp := &gatedCopier{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	l, err := Open(Config{Dir: "db", FS: vfs.NewMem(), Replica: "eu-1", Copier: cp})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var wg sync.WaitGroup
	appendOne := func(i int) {
		if _, err := l.Append(vote("p", fmt.Sprint("v", i), "red", fmt.Sprint("k", i), int64(10+i))); err != nil {
			t.Error(err)
		}
	}
	release := sync.OnceFunc(func() { close(cp.gate) })
	defer release() // on a failure too: Close waits for the copies
	wg.Go(func() { appendOne(0) })
	<-cp.entered // the first batch is in the copier
	syncs := l.Stats().WALSyncs
	for i := 1; i <= 5; i++ {
		wg.Go(func() { appendOne(i) })
		// Synced, its own batch, and queued behind the copy in flight.
		testwait.For(t, 10*time.Second, "a batch synced", func() bool { return l.Stats().WALSyncs >= syncs+uint64(i) })
	}
	release()
	wg.Wait()
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if len(cp.calls) != 2 || len(cp.calls[0]) != 1 || len(cp.calls[1]) != 5 {
		sizes := []int{}
		for _, c := range cp.calls {
			sizes = append(sizes, len(c))
		}
		t.Fatalf("copies of %v records, want [1 5]: the 5 batches queued behind the first in one", sizes)
	}
}
