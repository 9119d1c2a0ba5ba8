package relay

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"tally/api"
)

// Subject is the relay subject of a cluster. Every ready full node of
// every region subscribes to it in one queue group; NATS hands each batch
// to one member, preferring the publisher's own cluster (region) and
// crossing a gateway only when the region has none.
func Subject(cluster string) string { return "tally." + cluster + ".relay" }

// queueGroup is the full nodes' queue group on the relay subject.
const queueGroup = "full"

// Handler is what a full node does with a relayed request: node fills it
// with ingest, the same path a request made to the full node takes. The
// sender's facts are the edge's, believed because the message was sealed
// by a member.
type Handler interface {
	// Votes answers a batch's vote requests for one poll together (one
	// ledger commit for all), an Answer per request, in order.
	Votes(poll string, reqs []Request) []Answer
	Session(body []byte, s api.Sender) Answer
	// Participant checks a quiz join's voter token, as the full node
	// checks those of the sockets it holds itself.
	Participant(token, userAgent, ip string) (voter string, counted bool)
	// Proof answers GET /v1/polls/{poll}/proofs/{leaf} as the full node
	// answers its own clients: the status and the JSON body it would
	// write, an error's included. ctx ends when the edge stops waiting.
	Proof(ctx context.Context, poll, leaf string) (status int, body []byte)
}

// ServerConfig configures a Server.
type ServerConfig struct {
	Conn *nats.Conn
	// Cluster and Replica name the subjects it answers on: its own
	// (NodeSubject), where edges send the requests that rank it first,
	// and the shared one in the full nodes' queue group.
	Cluster, Replica string
	// Region is the node's, announced with its presence
	// (PresenceSubject) so that edges show where they relay.
	Region string
	// Ready says whether the node takes votes now (replayed, caught up,
	// not draining): announced every Every, and the node is in the shared
	// queue group only while it is. nil: always.
	Ready func() bool
	// Every is how often the node announces itself; default
	// PresenceEvery.
	Every   time.Duration
	Seal    func([]byte) []byte
	Open    func([]byte) ([]byte, error)
	Handler Handler
	// InFlight bounds the batches handled at once; default 64. Past it
	// NATS holds the next ones (and drops them as a slow consumer when
	// its limits are reached: their edges resend).
	InFlight int
	// Workers is how many parts of batches (a poll's votes, a session
	// request) are answered at once, across batches; default 512. They
	// are long-lived goroutines, which keep their grown stacks.
	Workers int
	Metrics *Metrics
	Logger  *slog.Logger
}

// Server is a full node's side of the relay: it answers the edges'
// batches, each request as if its client had asked this node.
type Server struct {
	cfg ServerConfig
	own *nats.Subscription // NodeSubject
	// shared is the subscription in the full nodes' queue group, held
	// while the node is ready (share); closing says Close began.
	subMu   sync.Mutex
	shared  *nats.Subscription
	closing bool
	stop    chan struct{} // closed by Close: the announcing ends
	beat    sync.WaitGroup
	sem     chan struct{}
	jobs    chan job
	mu      sync.RWMutex // held to send on jobs; stopped says jobs is closed
	stopped bool
	wg      sync.WaitGroup // batches in hand
	workers sync.WaitGroup
	once    sync.Once
	// malformedLog throttles the warning about undecodable batches.
	malformedLog throttle
}

// job is part of a batch for a worker to answer: a poll's votes, or a
// session request.
type job struct {
	run  func()
	done *sync.WaitGroup
}

// StartServer subscribes to the node's own relay subject and, while the
// node is ready, to the shared one in the full nodes' queue group, and
// announces the node's presence. Close stops it.
func StartServer(cfg ServerConfig) (*Server, error) {
	if cfg.InFlight <= 0 {
		cfg.InFlight = 64
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 512
	}
	if cfg.Ready == nil {
		cfg.Ready = func() bool { return true }
	}
	if cfg.Every <= 0 {
		cfg.Every = PresenceEvery
	}
	cfg.Seal, cfg.Open, cfg.Logger = defaults(cfg.Seal, cfg.Open, cfg.Logger)
	s := &Server{cfg: cfg, sem: make(chan struct{}, cfg.InFlight), jobs: make(chan job), malformedLog: throttle{every: 10 * time.Second},
		stop: make(chan struct{})}
	for range cfg.Workers {
		s.workers.Go(func() {
			for j := range s.jobs {
				j.run()
				j.done.Done()
			}
		})
	}
	own, err := cfg.Conn.Subscribe(NodeSubject(cfg.Cluster, cfg.Replica), s.receive)
	if err != nil {
		s.stopWorkers()
		return nil, err
	}
	s.own = own
	ready := cfg.Ready()
	if ready {
		shared, err := cfg.Conn.QueueSubscribe(Subject(cfg.Cluster), queueGroup, s.receive)
		if err != nil {
			own.Unsubscribe()
			s.stopWorkers()
			return nil, err
		}
		s.shared = shared
	}
	// The subscriptions are at the server when this returns, so an edge
	// that sees the node listed finds its subject. Disconnected, the client
	// replays them on reconnect; the error is not the caller's to handle.
	_ = cfg.Conn.FlushTimeout(time.Second)
	s.say(ready)
	s.beat.Go(func() { s.announce(s.stop) })
	return s, nil
}

// Close says the node is no longer ready (its edges relay elsewhere at
// once), unsubscribes (NATS hands the next batches to the other full
// nodes) and waits for the batches in hand to be answered.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		close(s.stop)
		s.beat.Wait()
		s.say(false)
		s.subMu.Lock()
		s.closing = true
		if s.shared != nil {
			err = s.shared.Unsubscribe()
			s.shared = nil
		}
		s.subMu.Unlock()
		err = errors.Join(err, s.own.Unsubscribe())
		s.wg.Wait()
		s.stopWorkers()
	})
	return err
}

func (s *Server) stopWorkers() {
	s.mu.Lock()
	s.stopped = true
	close(s.jobs)
	s.mu.Unlock()
	s.workers.Wait()
}

// submit hands j to a worker; a batch NATS delivered as Close ran (a
// callback already under way) is answered on its own goroutine.
func (s *Server) submit(j job) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.stopped {
		j.run()
		j.done.Done()
		return
	}
	s.jobs <- j
}

// receive runs on the subscription's goroutine: it waits for a slot and
// hands the batch to its own goroutine.
func (s *Server) receive(m *nats.Msg) {
	s.sem <- struct{}{}
	s.wg.Go(func() {
		defer func() { <-s.sem }()
		s.handle(m)
	})
}

// handle answers one batch. A message no member sealed, or one that does
// not decode, gets no answer at all and changes nothing.
func (s *Server) handle(m *nats.Msg) {
	body, err := s.cfg.Open(m.Data)
	if err != nil {
		s.cfg.Metrics.refused("unauthenticated")
		return
	}
	reply, startBy, reqs, err := decodeBatch(body)
	if err != nil {
		s.cfg.Metrics.refused("malformed")
		if ok, n := s.malformedLog.allow(time.Now()); ok {
			s.cfg.Logger.Warn("relay: malformed batch from a member", "err", err, "suppressed", n)
		}
		return
	}
	if startBy > 0 && time.Now().UnixMilli() > startBy {
		// Its edge has told the clients 503 (or is about to): answering
		// now would count votes their voters were told failed, after the
		// votes they sent since (a node that stalled with the batch queued).
		s.cfg.Metrics.refused("expired")
		return
	}
	s.cfg.Metrics.served(len(reqs))
	answers := make([]Answer, len(reqs))
	var wg sync.WaitGroup
	// A poll's votes are answered together (one append, one commit);
	// sessions and other polls' votes side by side by the workers, whose
	// records the ledger gathers into the same synced commit.
	for _, idx := range byPoll(reqs) {
		wg.Add(1)
		switch reqs[idx[0]].Kind {
		case KindSession:
			s.submit(job{run: func() { answers[idx[0]] = s.answerSession(reqs[idx[0]]) }, done: &wg})
			continue
		case KindJoin:
			s.submit(job{run: func() { answers[idx[0]] = s.answerJoin(reqs[idx[0]]) }, done: &wg})
			continue
		case KindProof:
			s.submit(job{run: func() { answers[idx[0]] = s.answerProof(startBy, reqs[idx[0]]) }, done: &wg})
			continue
		}
		s.submit(job{run: func() { s.answerVotes(reqs, idx, answers) }, done: &wg})
	}
	wg.Wait()
	if err := m.Respond(s.cfg.Seal(appendReply(nil, reply, answers))); err != nil {
		s.cfg.Logger.Warn("relay: cannot answer a batch", "err", err)
	}
}

// byPoll groups a batch's requests: the vote requests of each poll
// together, in order, and each session or join request alone.
func byPoll(reqs []Request) [][]int {
	var groups [][]int
	at := map[string]int{} // poll → its group
	for i, q := range reqs {
		if q.Kind != KindVote {
			groups = append(groups, []int{i})
			continue
		}
		g, ok := at[q.Poll]
		if !ok {
			g = len(groups)
			at[q.Poll] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// answerVotes answers the vote requests reqs[idx] of one poll into
// answers, with one Handler call.
func (s *Server) answerVotes(reqs []Request, idx []int, answers []Answer) {
	group := make([]Request, len(idx))
	for j, i := range idx {
		group[j] = reqs[i]
	}
	replies := s.cfg.Handler.Votes(group[0].Poll, group)
	for j, i := range idx {
		if j >= len(replies) {
			s.cfg.Logger.Error("relay: the handler answered too few requests", "answered", len(replies), "of", len(group))
			answers[i] = ErrorAnswer(errInternal)
			continue
		}
		answers[i] = s.checked(reqs[i], replies[j])
	}
}

// answerSession is the full node's answer to a session request.
func (s *Server) answerSession(q Request) Answer {
	return s.checked(q, s.cfg.Handler.Session(q.Body, q.Sender))
}

// answerJoin is the full node's answer to a quiz join's token check.
func (s *Server) answerJoin(q Request) Answer {
	voter, counted := s.cfg.Handler.Participant(q.Sender.Token, q.Sender.UserAgent, q.Sender.IP)
	return Answer{Join: &JoinAnswer{Voter: voter, Counted: counted}}
}

// answerProof is the full node's answer to a proof request, given until
// the edge stops waiting (startBy and its margin). One that cannot cross
// the relay (over receipt.MaxProofJSON, not JSON) is an internal error.
func (s *Server) answerProof(startBy int64, q Request) Answer {
	ctx := context.Background()
	if startBy > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.UnixMilli(startBy).Add(startMargin))
		defer cancel()
	}
	status, body := s.cfg.Handler.Proof(ctx, q.Poll, string(q.Body))
	p := &ProofAnswer{Status: status, Body: body}
	if !p.fits() {
		s.cfg.Logger.Error("relay: a proof answer that cannot be relayed", "poll", q.Poll, "status", status, "bytes", len(body))
		return ErrorAnswer(errBadProof)
	}
	return Answer{Proof: p}
}

// checked is a, or an internal error where a holds no answer of q's kind.
func (s *Server) checked(q Request, a Answer) Answer {
	ok := a.Err != nil || (q.Kind == KindVote && a.Vote != nil) || (q.Kind == KindSession && a.Session != nil)
	if !ok {
		s.cfg.Logger.Error("relay: the handler gave no answer", "kind", q.Kind, "poll", q.Poll)
		return ErrorAnswer(errInternal)
	}
	return a
}

// errInternal is the refusal of a request the handler failed to answer.
var errInternal = api.Errorf(http.StatusInternalServerError, api.CodeInternal, "internal error")

// ErrorOf is the Answer of a Handler's error: the *api.Error it is or
// wraps, else an internal error, logged to log.
func ErrorOf(err error, log *slog.Logger) Answer {
	var e *api.Error
	if !errors.As(err, &e) {
		log.Error("relay: internal error", "err", err)
		return ErrorAnswer(errInternal)
	}
	return ErrorAnswer(e)
}
