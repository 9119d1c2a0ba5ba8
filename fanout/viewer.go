package fanout

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// sender writes one encoded frame to a viewer's transport within ctx.
type sender interface {
	send(ctx context.Context, frame []byte) error
	close(reason string)
}

// frame is one tick's output, shared by every viewer of the hub.
type frame struct {
	seq      uint64
	snapshot []byte // the full state at seq
	diff     []byte // the change from seq-1 to seq; nil for heartbeats
	beat     bool
	open     bool // the poll is open in this frame
}

// viewer is one connected viewer. It holds at most one pending frame.
type viewer struct {
	hub       *hub
	out       sender
	ip        string // the key MaxViewersPerIP counts it under
	transport string

	writing atomic.Int64 // when the current write started (unix ns); 0 when idle
	shownMs atomic.Int64 // when the first open frame was written (Unix ms, Server's clock); 0: not yet
	rttMs   atomic.Int64 // the last ping round trip, ms; -1: not measured

	mu      sync.Mutex
	pending *frame
	queued  bool   // in the writers' queue
	busy    bool   // a writer is writing to it; at most one write at a time
	lastSeq uint64 // seq of the last frame written; 0 before the first
	closed  bool
	done    chan struct{} // closed when the viewer is disconnected
}

func newViewer(h *hub, out sender, ip, transport string) *viewer {
	v := &viewer{hub: h, out: out, ip: ip, transport: transport, done: make(chan struct{})}
	v.rttMs.Store(-1)
	return v
}

// offer makes f the viewer's pending frame and reports whether the viewer
// must be queued for a writer, and whether an unsent frame was replaced.
func (v *viewer) offer(f *frame) (queue, replaced bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return false, false
	}
	if v.pending != nil && !v.pending.beat {
		replaced = true
	}
	if f.beat && v.pending != nil {
		return false, false // a real frame is on its way
	}
	v.pending = f
	if v.queued || v.busy {
		return false, replaced // the writer re-queues it when done
	}
	v.queued = true
	return true, replaced
}

// take returns the bytes to write for the pending frame: the diff when the
// viewer has seq-1, otherwise the snapshot.
func (v *viewer) take() (b []byte, seq uint64, open, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.queued = false
	f := v.pending
	v.pending = nil
	if f == nil || v.closed {
		return nil, 0, false, false
	}
	v.busy = true
	switch {
	case f.beat:
		return f.snapshot, v.lastSeq, f.open, true // heartbeat bytes; seq unchanged
	case f.diff != nil && v.lastSeq == f.seq-1:
		return f.diff, f.seq, f.open, true
	}
	return f.snapshot, f.seq, f.open, true
}

// wrote records a finished write and reports whether a newer frame
// arrived meanwhile, so the viewer must be queued again.
func (v *viewer) wrote(seq uint64) (requeue bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lastSeq, v.busy = seq, false
	if v.pending != nil && !v.closed && !v.queued {
		v.queued = true
		return true
	}
	return false
}

// resync forgets what the viewer has, so its next frame is a snapshot.
func (v *viewer) resync() {
	v.mu.Lock()
	v.lastSeq = 0
	v.mu.Unlock()
}

// disconnect closes the viewer once.
func (v *viewer) disconnect(reason string) bool {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return false
	}
	v.closed = true
	v.pending = nil
	v.mu.Unlock()
	close(v.done)
	v.out.close(reason)
	return true
}

// writeFrame writes one pending frame. The write's deadline is kept by
// the watchdog rather than per write: a cancellable context per write
// registers with its parent under a shared lock and cost a tenth of the
// CPU at tens of thousands of frames a second. Close unblocks writes by
// closing the connections.
func (s *Server) writeFrame(v *viewer) {
	b, seq, open, ok := v.take()
	if !ok {
		return
	}
	v.writing.Store(time.Now().UnixNano())
	err := v.out.send(context.Background(), b)
	v.writing.Store(0)
	if err != nil {
		v.hub.remove(v, "gone")
		return
	}
	s.m.sent.WithLabelValues(v.transport).Inc()
	if open && v.shownMs.Load() == 0 {
		v.shownMs.CompareAndSwap(0, s.cfg.Now().UnixMilli()) // the question is on this viewer's screen
	}
	if v.wrote(seq) {
		s.enqueue(v)
	}
}
