package fanout

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tally/api"
	"tally/quiz"
	"tally/state"
)

// The defaults of Config's zero fields.
const (
	DefaultTick            = 250 * time.Millisecond // how often viewers get the changed tally
	DefaultMaxTick         = time.Second            // the longest the tick stretches to under load
	DefaultMaxViewers      = 19_000                 // live viewers a node serves (under ~20,000 open files)
	DefaultMaxViewersPerIP = 200                    // live viewers one client address may hold
)

// Voter takes votes sent on a socket: body is the same JSON as the body of
// POST /v1/polls/{poll}/votes. It returns the acknowledgement to send back,
// or an error (an *api.Error for a refusal).
type Voter interface {
	Vote(poll string, body []byte, s api.Sender) (api.VoteResponse, error)
}

// Standings is a quiz's ranking as the live streams show it.
type Standings struct {
	Top          []quiz.Standing // the first 10
	Participants int
	Digest       string // of the whole ranking; "" when there is none
	Final        bool   // every question closed and counted: the final standings
	// Of returns a voter's standing, if they are ranked.
	Of func(voter string) (quiz.Standing, bool)
}

// Config configures a Server. Zero values mean the defaults.
type Config struct {
	Source *state.State // where hubs read polls, tallies and viewers; required
	Voter  Voter        // nil: votes on the socket are refused
	Region string       // shown to viewers
	// Freshness, when set, returns the per-region freshness vector put in
	// every frame (region → age in ms of the newest state heard from it).
	Freshness func() map[string]int64
	// Standings, when set, returns a quiz's ranking (certify's): a quiz
	// question's frames and the quiz's stream carry its top whenever its
	// digest changes, and the quiz's stream tells each participant theirs.
	Standings func(quiz string) Standings
	// Participant, when set, checks the voter token a quiz stream's join
	// carries (ingest.Pipeline.Participant): the participant is the
	// token's voter when there is one, and counts among the quiz's joined
	// only if counted (a valid token within its address's quiz budget).
	// An error (the check got no answer) refuses the join, changing
	// nothing; the page joins again. Nil: every named join counts.
	Participant func(token, userAgent, ip string) (voter string, counted bool, err error)
	// NameAllowed, when set, vets the display name a quiz join gives (the
	// node's name filter, as for answers): a name it refuses is a 400 and
	// the join changes nothing. Nil: every well-formed name.
	NameAllowed func(name string) bool

	Tick time.Duration // default 250ms
	// MaxTick is how far the tick stretches while the node's CPU use is
	// over CPUBudget cores, or its goroutines wait for a core longer than
	// ContendedWait (pace.go); default 1s. CPU is the process's CPU time so
	// far; with it nil or CPUBudget 0 the tick stays at Tick. Wait is the
	// goroutines' wait for a core since its last call, p99 (nil: not
	// watched).
	MaxTick      time.Duration
	CPUBudget    float64
	CPU          func() time.Duration
	Wait         func() time.Duration
	RTTEvery     time.Duration // how often a quiz participant's socket is pinged; default 5s
	Heartbeat    time.Duration // default 15s
	WriteTimeout time.Duration // a viewer stuck this long on one write is dropped; default 5s
	Writers      int           // shared writer goroutines; default 4 × GOMAXPROCS

	MaxViewers      int     // default 19,000 (this machine allows ~20,000 open files)
	MaxViewersPerIP int     // default 200
	MaxInbound      int64   // bytes in one inbound WebSocket message; default 4096
	InboundPerSec   float64 // inbound messages per second per connection before it is closed; default 20
	// Origins is who may open a stream from a browser page: this site and
	// the --origins embedders (api.Origins, the rule of every browser write:
	// votes may be sent on a socket).
	Origins api.Origins

	// ClientIP names a request's client for the per-IP limit; default: the peer.
	ClientIP func(*http.Request) string
	// AddrKey maps a client IP to the key MaxViewersPerIP counts it under
	// (an IPv6 /64, say); nil: the IP itself.
	AddrKey func(string) string

	Registerer prometheus.Registerer
	Now        func() time.Time
}

// Server is the fan-out of one node.
type Server struct {
	cfg   Config
	src   *state.State
	m     *metrics
	joins atomic.Uint64 // quiz joins so far: their order (the lobby's newest names)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// sockets are the viewers' socket readers (serveWS).
	sockets sockets
	queue   chan *viewer
	pacer   *pacer

	mu      sync.Mutex
	hubs    map[string]*hub
	total   int
	perIP   map[string]int
	closing bool
}

// ErrClosed is returned when viewers arrive after Close.
var ErrClosed = errors.New("fanout: closed")

// New starts the shared writers.
func New(cfg Config) (*Server, error) {
	if cfg.Source == nil {
		return nil, errors.New("fanout: Source is required")
	}
	setDefault := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	setDefault(&cfg.Tick, DefaultTick)
	setDefault(&cfg.MaxTick, DefaultMaxTick)
	setDefault(&cfg.Heartbeat, 15*time.Second)
	setDefault(&cfg.RTTEvery, 5*time.Second)
	setDefault(&cfg.WriteTimeout, 5*time.Second)
	if cfg.Writers <= 0 {
		cfg.Writers = 4 * runtime.GOMAXPROCS(0)
	}
	if cfg.MaxViewers <= 0 {
		cfg.MaxViewers = DefaultMaxViewers
	}
	if cfg.MaxViewersPerIP <= 0 {
		cfg.MaxViewersPerIP = DefaultMaxViewersPerIP
	}
	if cfg.MaxInbound <= 0 {
		cfg.MaxInbound = 4096
	}
	if cfg.InboundPerSec <= 0 {
		cfg.InboundPerSec = 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("fanout: cannot register metrics: %w", err)
	}
	s := &Server{
		cfg: cfg, src: cfg.Source, m: m,
		queue: make(chan *viewer, cfg.MaxViewers+1024),
		hubs:  make(map[string]*hub), perIP: make(map[string]int),
		pacer: newPacer(cfg.Tick, cfg.MaxTick, cfg.CPUBudget, cfg.CPU, cfg.Wait),
	}
	m.interval.Set(cfg.Tick.Seconds())
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if cfg.CPU != nil && cfg.CPUBudget > 0 {
		s.wg.Add(1)
		go s.pace()
	}
	for range cfg.Writers {
		s.wg.Add(1)
		go s.writer()
	}
	s.wg.Add(1)
	go s.watchdog()
	return s, nil
}

// Close disconnects every viewer, stops every hub and writer, and waits
// for them. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	var all []*viewer
	for _, h := range s.hubs {
		h.mu.Lock()
		for v := range h.viewers {
			all = append(all, v)
		}
		h.mu.Unlock()
	}
	s.mu.Unlock()
	for _, v := range all {
		v.hub.remove(v, "server shutting down")
	}
	s.cancel()
	s.sockets.closeAndWait()
	s.wg.Wait()
	return nil
}

// sockets counts the goroutines that read the viewers' sockets (serveWS):
// Close waits for them, and none starts once it did.
type sockets struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (k *sockets) add() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return false
	}
	k.wg.Add(1)
	return true
}

func (k *sockets) done() { k.wg.Done() }

func (k *sockets) closeAndWait() {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.wg.Wait()
}

// join admits a viewer of a poll, or refuses it with an *api.Error.
func (s *Server) join(pollID, ip, transport string, out sender) (*viewer, error) {
	// A quiz question is nobody's to watch until the host starts it.
	if def, ok := s.src.Defs.Poll(pollID); !ok || def.Withheld(s.cfg.Now().UnixMilli()) {
		return nil, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", pollID)
	}
	return s.admit(newPollHub(s, pollID), ip, transport, out)
}

// joinQuiz admits a viewer of a quiz's stream.
func (s *Server) joinQuiz(quizID, ip, transport string, out sender) (*viewer, error) {
	if len(s.src.Defs.QuizQuestions(quizID)) == 0 {
		return nil, api.Errorf(http.StatusNotFound, api.CodeQuizNotFound, "no quiz %q", quizID)
	}
	return s.admit(newQuizHub(s, quizID), ip, transport, out)
}

// admit counts a viewer in and adds it to the hub of like's key, starting
// like as that hub when there is none.
func (s *Server) admit(like *hub, ip, transport string, out sender) (*viewer, error) {
	if s.cfg.AddrKey != nil {
		ip = s.cfg.AddrKey(ip) // the viewer counts against its address group
	}
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		return nil, api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "shutting down")
	case s.total >= s.cfg.MaxViewers:
		s.mu.Unlock()
		return nil, api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "this node serves its maximum of %d viewers", s.cfg.MaxViewers)
	case s.perIP[ip] >= s.cfg.MaxViewersPerIP:
		s.mu.Unlock()
		return nil, api.Errorf(http.StatusTooManyRequests, api.CodeRateLimited, "too many viewers from this address")
	}
	s.total++
	s.perIP[ip]++
	h, ok := s.hubs[like.key]
	if ok {
		v := newViewer(h, out, ip, transport)
		h.add(v)
		s.mu.Unlock()
		return v, nil
	}
	h = like
	h.stop, h.viewers = make(chan struct{}), make(map[*viewer]struct{})
	s.hubs[h.key] = h
	v := newViewer(h, out, ip, transport)
	h.viewers[v] = struct{}{} // counted in the first snapshot, which the tick delivers to it
	s.m.viewers.WithLabelValues(transport).Inc()
	h.tick()
	s.wg.Add(1)
	go h.run()
	s.mu.Unlock()
	return v, nil
}

// release returns a viewer's slots.
func (s *Server) release(v *viewer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total--
	if s.perIP[v.ip]--; s.perIP[v.ip] <= 0 {
		delete(s.perIP, v.ip)
	}
}

// dropHubIfEmpty stops a hub whose last viewer left.
func (s *Server) dropHubIfEmpty(h *hub) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h.mu.Lock()
	empty := len(h.viewers) == 0
	h.mu.Unlock()
	if empty && s.hubs[h.key] == h {
		delete(s.hubs, h.key)
		close(h.stop)
		h.stream.leave()
	}
}

// deliver makes f the viewer's pending frame and queues it for a writer.
func (s *Server) deliver(v *viewer, f *frame) {
	queue, replaced := v.offer(f)
	if replaced {
		s.m.replaced.Inc()
	}
	if queue {
		s.enqueue(v)
	}
}

func (s *Server) enqueue(v *viewer) {
	select {
	case s.queue <- v:
	case <-s.ctx.Done():
	}
}

// writer is one of the shared writers.
func (s *Server) writer() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case v := <-s.queue:
			s.writeFrame(v)
		}
	}
}

// pace moves the hubs' tick once a second by the node's CPU use.
func (s *Server) pace() {
	defer s.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			s.pacer.step(now)
			s.m.interval.Set(s.pacer.tick().Seconds())
			s.m.wait.Set(time.Duration(s.pacer.lastWait.Load()).Seconds())
		}
	}
}

// watchdog disconnects viewers whose current write has taken longer than
// WriteTimeout; closing the connection ends the stuck write.
func (s *Server) watchdog() {
	defer s.wg.Done()
	t := time.NewTicker(max(s.cfg.WriteTimeout/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		deadline := time.Now().Add(-s.cfg.WriteTimeout).UnixNano()
		var stuck []*viewer
		s.mu.Lock()
		for _, h := range s.hubs {
			h.mu.Lock()
			for v := range h.viewers {
				if w, r := v.writing.Load(), v.replying.Load(); w != 0 && w < deadline || r != 0 && r < deadline {
					stuck = append(stuck, v)
				}
			}
			h.mu.Unlock()
		}
		s.mu.Unlock()
		for _, v := range stuck {
			if v.hub.remove(v, "too slow") {
				s.m.slow.Inc()
			}
		}
	}
}

// Viewers returns how many viewers are connected.
func (s *Server) Viewers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}
