package node

import (
	"context"
	"errors"
	"testing"
)

// Close ends Run and returns its error; on a node never run it closes
// what Open opened (the data dir opens again at once); a second Close is
// harmless, and a closed node does not run.
func TestCloseIsTheOneWayToStop(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(testConfig(dir, &fakeClock{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatalf("closing a node never run: %v", err)
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if err := n.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v, want ErrClosed", err)
	}
	tn := startNode(t, dir, nil) // the ledger and the ports were released
	if err := tn.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("a second Run: %v, want ErrClosed", err)
	}
	if err := tn.stop(); err != nil { // Close, and Run's own return, agree
		t.Fatal(err)
	}
	if err := tn.Close(context.Background()); err != nil {
		t.Fatalf("Close after the stop: %v", err)
	}
}
