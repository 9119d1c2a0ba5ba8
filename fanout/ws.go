package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"

	"tally/api"
)

// wsSender writes frames to a WebSocket.
type wsSender struct{ c *websocket.Conn }

func (w wsSender) send(ctx context.Context, b []byte) error {
	return w.c.Write(ctx, websocket.MessageText, b)
}

// close drops the connection at once: a stuck peer cannot finish a
// closing handshake, and a departing one reconnects anyway.
func (w wsSender) close(string) { w.c.CloseNow() }

// inbound is a message a client sends on the socket; reply answers it.
type (
	inbound = api.SocketMessage
	reply   = api.SocketReply
)

// HandleLive serves GET /v1/polls/{poll}/live: the live stream over
// WebSocket. Clients may send {"type":"vote","ref":…,"body":{…}} and
// {"type":"resync"}; anything else, oversized messages and floods close the
// connection with a policy-violation status.
func (s *Server) HandleLive(w http.ResponseWriter, r *http.Request) {
	pollID := r.PathValue("poll")
	def, ok := s.src.Defs.Poll(pollID)
	if !ok || def.Withheld(s.cfg.Now().UnixMilli()) { // a quiz question before it opens is the host's
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", pollID))
		return
	}
	s.serveWS(w, r, def.Quiz != nil, func(ip string, out sender) (*viewer, error) {
		return s.join(pollID, ip, "websocket", out)
	})
}

// HandleQuizLive serves GET /v1/quizzes/{quiz}/live: a quiz's stream over
// WebSocket (quizhub.go). Besides resync, clients may send
// {"type":"join","voter":…} to be told their own standing, and
// {"type":"vote","poll":…,"ref":…,"token":…,"body":{…}} to answer the
// question poll names.
func (s *Server) HandleQuizLive(w http.ResponseWriter, r *http.Request) {
	quizID := r.PathValue("quiz")
	if len(s.src.Defs.QuizQuestions(quizID)) == 0 {
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodeQuizNotFound, "no quiz %q", quizID))
		return
	}
	s.serveWS(w, r, true, func(ip string, out sender) (*viewer, error) {
		return s.joinQuiz(quizID, ip, "websocket", out)
	})
}

// serveWS upgrades the request and serves the viewer that join admits
// until it leaves; timed says whether answers are timed (quiz questions),
// so the socket's round trip is measured.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request, timed bool, join func(ip string, out sender) (*viewer, error)) {
	// The HTTP server's request deadlines would cut the stream; a viewer's
	// writes get their own deadline per frame instead.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
	// One limit for everything a client sends: messages, pings and pongs
	// count against InboundPerSec, and the raw bytes against a budget of
	// that many full-size messages a second (so floods of empty frames
	// are caught too). Past either, the socket closes with 1008.
	lim := rate.NewLimiter(rate.Limit(s.cfg.InboundPerSec), int(2*s.cfg.InboundPerSec)+1)
	perSec := s.cfg.InboundPerSec * float64(s.cfg.MaxInbound+64)
	bytes := rate.NewLimiter(rate.Limit(perSec), int(max(2*perSec, 64<<10)))
	abuse := &abuseCloser{}
	jw := &jsonRefusals{ResponseWriter: w, r: r, wrap: func(nc net.Conn) net.Conn {
		return &budgetConn{Conn: nc, lim: bytes, over: func() { abuse.close("too many frames") }}
	}}
	control := func() bool {
		if lim.Allow() {
			return true
		}
		abuse.close("too many messages")
		return false
	}
	if err := s.cfg.Origins.CheckWrite(r); err != nil {
		api.WriteError(w, r, err) // votes may be sent on the socket: the rule of every browser write
		return
	}
	c, err := websocket.Accept(jw, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true, // the origin is checked above, by the one rule (api.Origins)
		OnPingReceived:     func(context.Context, []byte) bool { return control() },
		OnPongReceived:     func(context.Context, []byte) { control() },
	})
	if err != nil {
		jw.finish()
		return // Accept has answered, in the JSON error shape
	}
	abuse.start(c)
	// Message size is checked in readLoop, so an oversized message gets the
	// same policy-violation close as any other abuse.
	c.SetReadLimit(-1)
	ip := s.clientIP(r)
	v, err := join(ip, wsSender{c})
	if err != nil {
		var e *api.Error
		code := websocket.StatusTryAgainLater
		if errors.As(err, &e) && e.Status == http.StatusNotFound {
			code = websocket.StatusPolicyViolation
		}
		c.Close(code, err.Error())
		abuse.wait()
		return
	}
	if !s.sockets.add() {
		v.hub.remove(v, "server shutting down")
		abuse.wait()
		return
	}
	// The socket is read on a goroutine of the server's own, and the
	// handler returns: the HTTP server's goroutine — its deep stack, the
	// request and its headers — is let go, and a viewer holds only what
	// reading its socket needs (the connection was hijacked: net/http
	// does nothing more with it). Close waits for it.
	userAgent, opened := r.UserAgent(), time.Now()
	go s.serveSocket(v, c, lim, abuse, ip, userAgent, opened, timed)
}

// serveSocket reads an admitted viewer's socket until it leaves, on the
// server's goroutine (serveWS); timed says whether its round trip is
// measured (quiz answers).
func (s *Server) serveSocket(v *viewer, c *websocket.Conn, lim *rate.Limiter, abuse *abuseCloser, ip, userAgent string, opened time.Time, timed bool) {
	defer s.sockets.done()
	defer abuse.wait()
	defer v.hub.remove(v, "gone")
	defer func() {
		// What net/http did for the handler: a panic drops this one
		// socket, logged, not every viewer of the node.
		if p := recover(); p != nil {
			slog.Error("fanout: panic serving a socket", "panic", p, "stack", string(debug.Stack()))
			c.CloseNow()
		}
	}()
	if timed {
		// A quiz participant's round trip is measured and recorded
		// with each answer: the one unfairness the server cannot
		// remove.
		done := make(chan struct{})
		defer func() {
			v.hub.remove(v, "gone") // ends measureRTT's wait at once
			<-done
		}()
		go func() { defer close(done); s.measureRTT(v, c) }()
	}
	s.readLoop(v, c, lim, ip, userAgent, opened)
}

// measureRTT pings the socket now and every RTTEvery until the viewer is
// gone, keeping the last round trip. The handler waits for it.
func (s *Server) measureRTT(v *viewer, c *websocket.Conn) {
	t := time.NewTicker(s.cfg.RTTEvery)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RTTEvery)
		start := time.Now()
		if err := c.Ping(ctx); err == nil {
			v.rttMs.Store(time.Since(start).Milliseconds())
		}
		cancel()
		select {
		case <-v.done:
			return
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// abuseCloser closes a socket with 1008 from the callbacks that detect
// abuse inside the websocket library's read path, where Close itself
// would wait on that same read: on a goroutine of its own, which the
// handler waits for before it returns.
type abuseCloser struct {
	mu     sync.Mutex
	c      *websocket.Conn
	reason string // set before the connection was ready
	done   chan struct{}
}

func (a *abuseCloser) start(c *websocket.Conn) {
	a.mu.Lock()
	a.c = c
	reason := a.reason
	a.mu.Unlock()
	if reason != "" {
		a.close(reason)
	}
}

func (a *abuseCloser) close(reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.c == nil {
		a.reason = reason
		return
	}
	if a.done != nil {
		return
	}
	a.done = make(chan struct{})
	go func(c *websocket.Conn, done chan struct{}) {
		defer close(done)
		c.Close(websocket.StatusPolicyViolation, reason)
	}(a.c, a.done)
}

func (a *abuseCloser) wait() {
	a.mu.Lock()
	done := a.done
	a.mu.Unlock()
	if done != nil {
		<-done
	}
}

func (s *Server) readLoop(v *viewer, c *websocket.Conn, lim *rate.Limiter, ip, userAgent string, opened time.Time) {
	var buf []byte // one message at a time, reused: a socket vote allocates no read buffer
	for {
		typ, rd, err := c.Reader(context.Background()) // Close ends it by closing the connection
		if err != nil {
			return // closed or gone
		}
		data, err := readMessage(rd, buf[:0], s.cfg.MaxInbound+1)
		if err != nil {
			return
		}
		buf = keep(data)
		received := s.cfg.Now().UnixMilli()
		if int64(len(data)) > s.cfg.MaxInbound {
			c.Close(websocket.StatusPolicyViolation, "message too large")
			return
		}
		if !lim.Allow() {
			c.Close(websocket.StatusPolicyViolation, "too many messages")
			return
		}
		var in inbound
		if typ != websocket.MessageText || api.Unmarshal(data, &in) != nil {
			c.Close(websocket.StatusPolicyViolation, "messages must be JSON objects of a known type")
			return
		}
		switch {
		case in.Type == "resync":
			v.hub.resync(v)
		case in.Type == "vote":
			pollID := in.Poll // on a quiz's stream, the question it answers
			switch st := v.hub.stream.(type) {
			case *pollHub:
				pollID = st.poll
			case *quizHub:
				if !s.isQuestion(st.quiz, in.Poll) {
					s.reply(v, c, in.Ref, nil, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "quiz %q has no started question %q", st.quiz, in.Poll))
					continue
				}
			}
			s.vote(v, c, in, pollID, api.Sender{IP: ip, UserAgent: userAgent, Token: in.Token, SocketAge: time.Since(opened),
				ShownMs: v.shownAt(pollID), RTTMs: v.rttMs.Load(), ReceivedMs: received})
		case in.Type == "join" && isQuiz(v.hub):
			ack, err := s.joinAs(v, in, ip, userAgent)
			s.reply(v, c, in.Ref, ack, err)
		default:
			c.Close(websocket.StatusPolicyViolation, "unknown message type")
			return
		}
	}
}

// isQuiz reports whether h is a quiz's stream.
func isQuiz(h *hub) bool { _, ok := h.stream.(*quizHub); return ok }

// joinAs answers a quiz stream's join message: who the participant is
// (the token's voter, checked by Config.Participant) and the display name
// they go by, in its normal form, vetted by the name filter and refused
// when it looks like another participant's (quizHub.takeName). A refused
// join changes nothing.
func (s *Server) joinAs(v *viewer, in inbound, ip, userAgent string) (ack any, err error) {
	if in.Voter == "" || len(in.Voter) > maxVoterLen {
		return nil, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "voter must be 1-%d bytes", maxVoterLen)
	}
	name := ""
	if in.Name != "" {
		if name, err = api.NormalName(in.Name); err != nil {
			return nil, err
		}
		if s.cfg.NameAllowed != nil && !s.cfg.NameAllowed(name) {
			return nil, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "the name %q is not allowed here; choose another", name)
		}
	}
	voter, counted := in.Voter, true
	if s.cfg.Participant != nil {
		tokVoter, ok, err := s.cfg.Participant(in.Token, userAgent, ip)
		if err != nil {
			return nil, err // unchecked: refused, the viewer's join stands as it was
		}
		if counted = ok; tokVoter != "" {
			voter = tokVoter // a token names its voter: no one joins as another
		}
	}
	qh := v.hub.stream.(*quizHub)
	if err := qh.takeName(voter, name, counted); err != nil {
		return nil, err
	}
	qh.setParticipant(v, voter, name, counted)
	// The server's time now: the frame a joining viewer gets first may be
	// old, so a page sets its clock by this.
	out := map[string]any{"voter": voter, "server_time": s.cfg.Now().UnixMilli()}
	if name != "" {
		out["name"] = name // as it is kept and shown: in its normal form
	}
	return out, nil
}

// maxVoterLen bounds the voter id a quiz participant joins with (the
// ledger's bound).
const maxVoterLen = 128

// isQuestion reports whether pollID is a started question of quizID.
func (s *Server) isQuestion(quizID, pollID string) bool {
	def, ok := s.src.Defs.Poll(pollID)
	return ok && def.Quiz != nil && def.Quiz.Quiz == quizID && !def.Withheld(s.cfg.Now().UnixMilli())
}

func (s *Server) vote(v *viewer, c *websocket.Conn, in inbound, pollID string, sock api.Sender) {
	if s.cfg.Voter == nil {
		s.reply(v, c, in.Ref, nil, api.Errorf(http.StatusForbidden, api.CodeUnauthorized, "this node does not take votes"))
		return
	}
	result, err := s.cfg.Voter.Vote(pollID, in.Body, sock)
	if err != nil {
		s.reply(v, c, in.Ref, nil, err)
		return
	}
	b := ackBuffers.Get().(*[]byte)
	*b = api.AppendSocketAck((*b)[:0], in.Ref, result)
	s.writeReply(v, c, *b)
	ackBuffers.Put(b)
}

// ackBuffers hold the encoded answers to socket votes between writes.
var ackBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// reply answers an inbound message with an ack carrying result, or with
// err (an *api.Error; anything else is an internal error).
func (s *Server) reply(v *viewer, c *websocket.Conn, ref string, result any, err error) {
	out := reply{Type: TypeAck, Ref: ref, Result: result}
	if err != nil {
		e := &api.Error{}
		if !errors.As(err, &e) {
			e = api.Errorf(http.StatusInternalServerError, api.CodeInternal, "internal error")
		}
		out.Type, out.Result = TypeError, nil
		out.Error = &api.ErrorInfo{Code: e.Code, Message: e.Message}
	}
	b, _ := json.Marshal(out)
	s.writeReply(v, c, b)
}

// writeReply writes an answer to the viewer's own message. Its deadline
// is the watchdog's (viewer.replying), as a frame's is: a context with a
// timeout per answer cost a timer and a registration with its parent per
// socket vote.
func (s *Server) writeReply(v *viewer, c *websocket.Conn, b []byte) {
	v.replying.Store(time.Now().UnixNano())
	c.Write(context.Background(), websocket.MessageText, b)
	v.replying.Store(0)
}

// keepReadBuffer bounds the read buffer a socket keeps between messages:
// one grown by a large message (up to MaxInbound) is let go, so an idle
// viewer does not hold it.
const keepReadBuffer = 1024

// keep is the buffer to read the next message into: b, or nil when it
// grew past keepReadBuffer.
func keep(b []byte) []byte {
	if cap(b) > keepReadBuffer {
		return nil
	}
	return b
}

// readMessage reads one message of at most limit bytes into buf (grown
// as needed, kept for the next), or the first limit bytes of a longer
// one: the caller refuses it by its length.
func readMessage(rd io.Reader, buf []byte, limit int64) ([]byte, error) {
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := rd.Read(buf[len(buf):min(int64(cap(buf)), limit)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

func (s *Server) clientIP(r *http.Request) string {
	if s.cfg.ClientIP != nil {
		return s.cfg.ClientIP(r)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
