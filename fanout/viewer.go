package fanout

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	// shown names the question poll open in this frame, whose time starts
	// for a viewer when the frame is written to it; "" when none is open.
	shown string
}

// viewer is one connected viewer. It holds at most one pending frame.
type viewer struct {
	hub       *hub
	out       sender
	ip        string // the key MaxViewersPerIP counts it under
	transport string

	sent    prometheus.Counter // tally_frames_sent_total of its transport, looked up once
	writing atomic.Int64       // when the current write started (unix ns); 0 when idle
	// replying is writing's twin for the read loop's answers to the
	// viewer's own messages (ws.go), which may be written while a frame is.
	replying atomic.Int64
	rttMs    atomic.Int64 // the last ping round trip, ms; -1: not measured

	mu sync.Mutex
	// shownPoll is the last open poll written to the viewer, and shownMs
	// when its first open frame was (Unix ms, Server's clock).
	shownPoll   string
	shownMs     int64
	participant string // a quiz stream's participant (voter id), once they said; "" before
	counted     bool   // the participant counts among the quiz's joined (Config.Participant)
	name        string // the participant's display name, as their join gave it, in its normal form ("" none)
	holder      uint64 // the participant's voter id hashed (state.Hash): who the lobby's report says took the name
	joinSeq     uint64 // the order of the participant's join at this node (Server.joins): the lobby's newest first
	joinedMs    int64  // when they joined, by this node's clock
	personal    []byte // a frame for this viewer alone (its quiz standing), written after pending
	pending     *frame
	queued      bool   // in the writers' queue
	busy        bool   // a writer is writing to it; at most one write at a time
	lastSeq     uint64 // seq of the last frame written; 0 before the first
	closed      bool
	done        chan struct{} // closed when the viewer is disconnected
}

func newViewer(h *hub, out sender, ip, transport string) *viewer {
	v := &viewer{hub: h, out: out, ip: ip, transport: transport, sent: h.s.m.sent.WithLabelValues(transport), done: make(chan struct{})}
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

// offerPersonal makes b the viewer's pending personal frame (a newer one
// replaces it) and reports whether the viewer must be queued.
func (v *viewer) offerPersonal(b []byte) (queue bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return false
	}
	v.personal = b
	if v.queued || v.busy {
		return false
	}
	v.queued = true
	return true
}

// take returns the bytes to write next: for the pending frame, the diff
// when the viewer has seq-1, otherwise the snapshot; with no frame
// pending, the personal one.
func (v *viewer) take() (b []byte, seq uint64, shown string, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.queued = false
	f := v.pending
	v.pending = nil
	if v.closed {
		return nil, 0, "", false
	}
	if f == nil {
		b, v.personal = v.personal, nil
		v.busy = b != nil
		return b, v.lastSeq, "", b != nil
	}
	v.busy = true
	switch {
	case f.beat:
		return f.snapshot, v.lastSeq, f.shown, true // heartbeat bytes; seq unchanged
	case f.diff != nil && v.lastSeq == f.seq-1:
		return f.diff, f.seq, f.shown, true
	}
	return f.snapshot, f.seq, f.shown, true
}

// markShown records that an open frame of question poll p reached the
// viewer at nowMs, unless an earlier one did: a moment the quiz clock
// reads (quiz.Elapsed).
func (v *viewer) markShown(p string, nowMs int64) {
	v.mu.Lock()
	first := v.shownPoll != p
	if first {
		v.shownPoll, v.shownMs = p, nowMs
	}
	who := v.participant
	v.mu.Unlock()
	if first && who != "" {
		v.hub.s.src.MarkShown(p, who, nowMs)
	}
}

// shownAt returns when poll p's question was first written to the viewer
// open (Unix ms); 0: it was not, or another question has been since.
func (v *viewer) shownAt(p string) int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.shownPoll != p {
		return 0
	}
	return v.shownMs
}

// wrote records a finished write and reports whether a newer frame
// arrived meanwhile, so the viewer must be queued again.
func (v *viewer) wrote(seq uint64) (requeue bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lastSeq, v.busy = seq, false
	if (v.pending != nil || v.personal != nil) && !v.closed && !v.queued {
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
	v.pending, v.personal = nil, nil
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
	b, seq, shown, ok := v.take()
	if !ok {
		return
	}
	v.writing.Store(time.Now().UnixNano())
	if shown != "" {
		// Marked before the write: the participant may answer before it
		// returns. (A failed write drops the viewer.)
		v.markShown(shown, s.cfg.Now().UnixMilli())
	}
	err := v.out.send(context.Background(), b)
	v.writing.Store(0)
	if err != nil {
		v.hub.remove(v, "gone")
		return
	}
	v.sent.Inc()
	if v.wrote(seq) {
		s.enqueue(v)
	}
}
