package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/internal/testwait"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestWatchPrintsTheTallyUntilTheCertificate: `tally watch` prints a line
// per change and ends, with status 0, at the certified result.
func TestWatchPrintsTheTallyUntilTheCertificate(t *testing.T) {
	base := startTestNode(t, t.TempDir())
	t.Setenv("TALLY_TOKEN", "tok")
	if _, stderr, code := runCLI(t, "poll", "create", "--node", base, "--id", "p", "--question", "Q?", "--option", "a", "--option", "b", "--grace", "1ms"); code != 0 {
		t.Fatalf("create: %s", stderr)
	}
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- run([]string{"watch", "--url", base, "--poll", "p"}, &out, &errb) }()
	testwait.For(t, 10*time.Second, "the first line", func() bool { return strings.Contains(out.String(), "open total 0  a=0 b=0") })
	vote(t, base, "p", "a", "ann")
	testwait.For(t, 10*time.Second, "the vote", func() bool { return strings.Contains(out.String(), "open total 1  a=1 b=0") })
	if _, stderr, code := runCLI(t, "poll", "close", "--node", base, "--poll", "p"); code != 0 {
		t.Fatalf("close: %s", stderr)
	}
	testwait.For(t, 10*time.Second, "the certificate", func() bool {
		_, _, code := runCLI(t, "poll", "certify", "--node", base, "--poll", "p")
		return code == 0
	})
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(out.String(), "reconciled total 1  a=1 b=0") {
			t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("tally watch did not end at the certificate:\n%s", out.String())
	}
	var e bytes.Buffer
	if code := run([]string{"watch", "--url", "ftp://x", "--poll", "p"}, &e, &e); code != 2 || strings.Count(e.String(), "\n") != 1 {
		t.Fatalf("a bad --url: %d %q", code, e.String())
	}
	e.Reset()
	if code := run([]string{"watch", "--url", base, "--poll", "nope"}, &e, &e); code != 1 || !strings.Contains(e.String(), "poll_not_found") {
		t.Fatalf("a missing poll: %d %q", code, e.String())
	}
}

// A small viewer swarm against a real node: every viewer connects, none
// drops, and frames arrive while votes flow.
func TestViewerSwarmMeasuresFrames(t *testing.T) {
	if testing.Short() {
		t.Skip("a load run of seconds: not in the -short inner loop")
	}
	base := startTestNode(t, t.TempDir())
	if c := post(t, base+"/v1/polls", `{"id":"sw","question":"Colour?","options":[{"id":"red","label":"Red"},{"id":"green","label":"Green"},{"id":"blue","label":"Blue"},{"id":"gold","label":"Gold"}],"duration_s":600}`); c != 201 {
		t.Fatalf("create: %d", c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 20
	// A run measures for two seconds; on a loaded machine those can pass
	// before the votes' first frame, so the test runs again (bounded by
	// the minute) until one has measured frames.
	for {
		rep, err := runSwarm(ctx, swarmConfig{url: base, poll: "sw", viewers: n, perIP: 10, ramp: 100 * time.Millisecond,
			duration: 2 * time.Second, votesPerSec: 20, progress: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Connected != n || rep.Disconnected != 0 {
			t.Fatalf("swarm report: %+v", rep)
		}
		if rep.Frames > 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no run within the minute measured a frame; the last: %+v", rep)
		}
	}
}
