package node

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"time"
)

// runState is what Run and Close share: Run's stop, and its end.
type runState struct {
	mu      sync.Mutex
	running bool               // Run was called
	closed  bool               // Close was called
	stop    context.CancelFunc // ends Run
	done    chan struct{}      // closed when Run has returned
	err     error              // Run's error, once done
}

// ErrClosed is what Run answers on a node that was closed or runs already.
var ErrClosed = errors.New("node: closed or already running")

// Run serves until ctx is done, then shuts down gracefully: it stops
// accepting, waits up to the shutdown timeout for in-flight requests, and
// closes the ledger. The ledger is replayed into the counters first; until
// that is done /readyz answers 503 and the API refuses requests.
//
// Run may be called once. Cancelling ctx or calling Close ends it.
func (n *Node) Run(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	l := &n.life
	l.mu.Lock()
	if l.running || l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.running, l.stop, l.done = true, stop, make(chan struct{})
	l.mu.Unlock()
	err := run(ctx, n)
	l.err = err
	close(l.done)
	return err
}

// Close stops the node as cancelling Run's context does and waits, until
// ctx is done, for Run to return; it returns Run's error. On a node that
// was opened but never run it closes what Open opened. It is safe to call
// more than once.
func (n *Node) Close(ctx context.Context) error {
	l := &n.life
	l.mu.Lock()
	first := !l.closed
	l.closed = true
	running, stop, done := l.running, l.stop, l.done
	l.mu.Unlock()
	if !running {
		if !first {
			return nil
		}
		return closeUnrun(n)
	}
	stop()
	select {
	case <-done:
		return l.err
	case <-ctx.Done():
		return fmt.Errorf("node: close: %w", ctx.Err())
	}
}

// closeUnrun closes what Open opened, for a node never run.
func closeUnrun(n *Node) error {
	for _, ln := range []net.Listener{n.listener, n.adminLn, n.debugLn} {
		if ln != nil {
			ln.Close()
		}
	}
	err := n.closeStorage()
	if cerr := n.clock.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("node: %w", cerr))
	}
	return err
}

// run is Run's body: serve, replay, run until done, shut down.
func run(ctx context.Context, n *Node) error {
	serveErr := make(chan error, 3)
	go func() { serveErr <- n.srv.Serve(n.listener) }()
	stopSide := serveSide(n, serveErr)
	defer stopSide()
	n.banner()

	replayed, err := replayLedger(ctx, n)
	stopRelay := func() {}
	if err == nil && ctx.Err() == nil {
		stopRelay, err = runUntilDone(ctx, n, serveErr)
	}
	return shutdown(n, err, replayed, stopRelay)
}

// serveSide serves the admin and debug listeners: they are Run's too, and
// one that stops serving ends Run with an error naming its flag, as the
// public one does. The function returned closes them and waits.
func serveSide(n *Node, serveErr chan<- error) (stop func()) {
	var side sync.WaitGroup
	var servers []*http.Server
	for _, s := range []struct {
		flag string
		srv  *http.Server
		ln   net.Listener
	}{{"--admin-addr", n.adminSrv, n.adminLn}, {"--debug-addr", n.debugSrv, n.debugLn}} {
		if s.srv == nil {
			continue
		}
		servers = append(servers, s.srv)
		side.Go(func() {
			if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("node: %s stopped serving: %w", s.flag, err)
			}
		})
	}
	return func() {
		for _, srv := range servers {
			srv.Close()
		}
		side.Wait()
	}
}

// replayLedger restores the vote state from the checkpoint and the ledger,
// then the kept tallies (and marks the run started), and waits out the
// clock's mark after an unclean stop. It reports whether the state is
// whole (a final checkpoint may be written at the stop).
func replayLedger(ctx context.Context, n *Node) (bool, error) {
	start := time.Now()
	applied, err := n.ckpt.restore()
	n.state.TakeBallots(math.MaxInt) // replayed ballots are not news: the others have them or fetch them
	if err != nil {
		return false, fmt.Errorf("node: replay: %w", err)
	}
	n.m.replaySeconds.Set(time.Since(start).Seconds())
	n.m.replayRecords.Set(float64(applied))
	n.log.Info("ledger replayed", "records", applied, "took", time.Since(start).Round(time.Millisecond))
	if err := n.ckpt.loadTallies(); err != nil {
		return false, err
	}
	if err := reapplyCopies(n); err != nil {
		return false, err
	}
	// After a crash the clock resumes from its saved mark, up to a second
	// ahead of the wall: wait that out before taking votes, so a vote acked
	// now never orders after a change of mind that the same client sends to
	// another region a moment later.
	if waited, _ := n.clock.WaitOutMark(ctx); waited > 0 {
		n.log.Info("waited out the clock's high-water mark after an unclean stop", "waited", waited.Round(time.Millisecond))
	}
	return true, nil
}

// runUntilDone joins the cluster, starts the relay and the background
// loops, turns ready (after an unclean stop, once it holds again what it
// showed: catchup.go), and waits for ctx (then drains) or a server's
// failure. The loops have stopped when it returns; the relay is stopped by
// the function it returns, after HTTP.
func runUntilDone(ctx context.Context, n *Node, serveErr <-chan error) (stopRelay func(), err error) {
	stopRelay = func() {}
	n.gossip.SetAddrs(n.Addr(), n.AdminAddr()) // AdminAddr "" without --admin-addr: none announced
	if err = flagError(n.gossip.Start()); err == nil {
		n.log.Info("gossip started", "gossip_addr", n.gossip.GossipAddr(), "members", len(n.gossip.Members()))
		stopRelay, err = n.startRelay()
	}
	if err == nil {
		var stopBuddy func()
		if stopBuddy, err = startBuddy(n); err == nil {
			relayOnly := stopRelay
			stopRelay = func() { relayOnly(); stopBuddy() } // the copies are kept for the primaries to the last
		}
	}
	if err != nil {
		if _, ok := errors.AsType[*flagErr](err); ok {
			err = fmt.Errorf("%w: %w", ErrConfig, err)
		}
		return stopRelay, err
	}
	loopCtx, stopLoops := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	loops.Go(func() { n.certify.Run(loopCtx) })
	loops.Go(func() { n.ckpt.loop(loopCtx) })
	loops.Go(func() { n.ckpt.saveTalliesLoop(loopCtx) })
	loops.Go(func() { n.forgetLoop(loopCtx) })
	loops.Go(func() { n.keys.loop(loopCtx) })
	restoring := n.restore.start(n) // before the start is done: nothing certifies from a chain a restore left short
	n.startAt.Store(time.Now().UnixNano())
	if n.ckpt.whole && !restoring {
		n.ready.Store(true)
	} else {
		loops.Go(func() { readyOnceRegained(loopCtx, n) })
	}
	loops.Go(func() { n.watchCatchUp(loopCtx) })
	select {
	case <-ctx.Done():
		drain(n, serveErr)
	case err = <-serveErr:
	}
	stopLoops()
	loops.Wait()
	return stopRelay, err
}

// shutdown stops in the order a load balancer and the other regions need:
// HTTP first (no new connections, in-flight requests finish and are
// acked), then leave the cluster (after a last delta of this node's
// counts), then the final checkpoint and the ledger.
func shutdown(n *Node, err error, replayed bool, stopRelay func()) error {
	n.log.Info("shutting down: finishing in-flight requests")
	n.fanout.Close() // live streams end first: http.Server.Shutdown would wait for them
	shutdownCtx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	if serr := n.srv.Shutdown(shutdownCtx); serr != nil {
		err = errors.Join(err, fmt.Errorf("node: shutdown: %w", serr))
	}
	stopRelay() // after the HTTP requests, before NATS: an edge's waiting votes are answered, a full node's batches in hand too
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	n.ready.Store(false)
	if gerr := n.gossip.Close(); gerr != nil {
		n.log.Warn("gossip close", "err", gerr)
	}
	if replayed {
		// The memory state is whole and no request is in flight any more: a
		// checkpoint now makes the next start replay nothing.
		if cerr := n.ckpt.write(); cerr != nil {
			n.log.Error("final checkpoint", "err", cerr)
		}
		if serr := n.ckpt.keepLast(); serr != nil {
			n.log.Error("final save of the tallies; the next start answers once it holds the other replicas' state", "err", serr)
		}
	}
	err = errors.Join(err, n.closeStorage())
	if cerr := n.clock.Close(); cerr != nil { // a clean stop: the next start need not wait
		err = errors.Join(err, fmt.Errorf("node: %w", cerr))
	}
	if err != nil {
		n.log.Error("stopped", "replica", n.replica, "err", err)
	} else {
		n.log.Info("stopped", "replica", n.replica)
	}
	return err
}

// drain is the first step of a graceful stop: /readyz answers 503 and
// every response asks its client to reconnect (Connection: close), so a
// load balancer moves traffic elsewhere, while the node keeps serving
// everything for cfg.Drain. It returns early if the server fails.
func drain(n *Node, serveErr <-chan error) {
	n.draining.Store(true)
	if n.cfg.Drain <= 0 {
		return
	}
	n.log.Info("draining: /readyz answers 503, still serving", "for", n.cfg.Drain)
	t := time.NewTimer(n.cfg.Drain)
	defer t.Stop()
	select {
	case <-t.C:
	case err := <-serveErr:
		n.log.Error("http server stopped while draining", "err", err)
	}
}
