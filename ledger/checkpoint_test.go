package ledger

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// A checkpoint taken while appends go on holds every record acknowledged
// before it, as whole chains, and opens as a ledger of its own.
func TestCheckpointWhileAppending(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Config{Dir: filepath.Join(dir, "live"), Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := l.Append(Record{Poll: "p", Voter: fmt.Sprint("v", i), Option: "a", Idem: fmt.Sprint("k", i), Wall: int64(i + 1), Trust: 1, Counted: true}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// Wait for some records, note how many were acknowledged, checkpoint.
	for {
		if n, _, _ := l.Head("p", "eu-1"); n >= 200 {
			break
		}
	}
	acked, _, err := l.Head("p", "eu-1")
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(dir, "snap")
	if err := l.Checkpoint(snap); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if err := l.Checkpoint(snap); err == nil {
		t.Fatal("a checkpoint over an existing directory succeeded")
	}

	c, err := Open(Config{Dir: snap, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	chains, err := VerifyChains(c.Scan("p"))
	if err != nil {
		t.Fatalf("the checkpoint's chain does not verify: %v", err)
	}
	if len(chains) != 1 || chains[0].Records < acked {
		t.Fatalf("checkpoint chains %+v, want one with at least the %d records acknowledged before it", chains, acked)
	}
	if live, _, _ := l.Head("p", "eu-1"); live < chains[0].Records {
		t.Fatalf("checkpoint holds %d records, more than the ledger's %d", chains[0].Records, live)
	}
}

func TestCheckpointOfAClosedLedger(t *testing.T) {
	l, err := Open(Config{Dir: t.TempDir(), Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := l.Checkpoint(filepath.Join(t.TempDir(), "snap")); err == nil {
		t.Fatal("checkpoint of a closed ledger succeeded")
	}
}
