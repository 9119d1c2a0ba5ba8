package fanout

import (
	"context"
	"net/http"
	"sync"
	"time"

	"tally/api"
)

// sseSender writes frames as Server-Sent Events. Writers call send from
// their own goroutines while the handler waits, so every use of the
// ResponseWriter happens under mu, and none after the handler returns.
type sseSender struct {
	mu      sync.Mutex
	timeout time.Duration
	w       http.ResponseWriter
	rc      *http.ResponseController
	closed  bool
}

func (s *sseSender) send(ctx context.Context, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return context.Canceled
	}
	s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.w.Write(append(append([]byte("data: "), b...), '\n', '\n')); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sseSender) close(string) {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// HandleEvents serves GET /v1/polls/{poll}/events: the same stream as
// HandleLive, as Server-Sent Events (read-only).
func (s *Server) HandleEvents(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Origins.CheckWrite(r); err != nil { // the socket's rule, so that both streams answer alike
		api.WriteError(w, r, err)
		return
	}
	out := &sseSender{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout}
	out.rc.SetReadDeadline(time.Time{})
	out.rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	out.mu.Lock() // no frame before the headers
	v, err := s.join(r.PathValue("poll"), s.clientIP(r), "sse", out)
	if err != nil {
		out.closed = true
		out.mu.Unlock()
		h.Del("Content-Type")
		api.WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
	out.rc.Flush()
	out.mu.Unlock()
	defer v.hub.remove(v, "gone")
	select {
	case <-r.Context().Done():
	case <-v.done:
	}
	out.close("")
}
