package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"tally/api"
	"tally/ids"
)

// EdgeConfig configures an Edge.
type EdgeConfig struct {
	// Conn returns the node's NATS connection; nil while it has none.
	Conn func() *nats.Conn
	// Cluster names the relay's subjects (Subject, NodeSubject).
	Cluster string
	// FullNodes returns the replica ids of the cluster's live full nodes:
	// those of the edge's own region, then the others. A request goes to
	// the one its idempotency key ranks first (rendezvous hashing), so a
	// retry through any edge reaches the node that answered it first;
	// the rest are its failover order. nil: only the shared queue group.
	FullNodes func() (region, others []string)
	// Seal and Open authenticate relay messages with the cluster's
	// keyring (package gossip's); nil: passed as they are (tests).
	Seal func([]byte) []byte
	Open func([]byte) ([]byte, error)
	// Wait is how long a batch gathers requests after its first;
	// default 2 ms.
	Wait time.Duration
	// Batch is the most requests in one relay message; default 256, at
	// most MaxBatch.
	Batch int
	// Attempt bounds one relay attempt; default 700 ms.
	Attempt time.Duration
	// Deadline bounds every attempt of a batch together: after it the
	// batch's clients are answered 503 unavailable; default 1.8 s.
	Deadline time.Duration
	// ClientIP is the client's address after the trusted proxies.
	ClientIP func(*http.Request) string
	// MaxBody bounds a request body, as a full node does.
	MaxBody int64
	// Metrics counts batches and failovers; nil: none.
	Metrics *Metrics
	Logger  *slog.Logger
	// Now is the edge's clock, which times quiz answers; nil: time.Now.
	Now func() time.Time
}

// Edge relays its clients' votes and session requests to the full nodes,
// gathered into batches, and gives each client the full node's answer.
// Run gathers and sends; it is safe for concurrent use.
type Edge struct {
	cfg EdgeConfig
	in  chan *pending
	// lostLog throttles the warning about batches no full node answered:
	// with a region's full nodes down, every batch would write one.
	lostLog throttle
}

type pending struct {
	req  Request
	key  string      // what routes it (affinityKey)
	done chan Answer // buffered: the batch never waits for a client
}

// startMargin is how long before an edge's deadline a full node must have
// started a batch: its commit and the answer's way back fit in it.
const startMargin = 300 * time.Millisecond

// NewEdge returns an Edge; its batches go out once Run runs.
func NewEdge(cfg EdgeConfig) *Edge {
	if cfg.Wait <= 0 {
		cfg.Wait = 2 * time.Millisecond
	}
	if cfg.Batch <= 0 || cfg.Batch > MaxBatch {
		cfg.Batch = 256
	}
	if cfg.Attempt <= 0 {
		cfg.Attempt = 700 * time.Millisecond
	}
	if cfg.Deadline <= 0 {
		cfg.Deadline = 1800 * time.Millisecond
	}
	cfg.Seal, cfg.Open, cfg.Logger = defaults(cfg.Seal, cfg.Open, cfg.Logger)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBody <= 0 || cfg.MaxBody > MaxBody {
		cfg.MaxBody = MaxBody
	}
	return &Edge{cfg: cfg, in: make(chan *pending, 4*MaxBatch), lostLog: throttle{every: 5 * time.Second}}
}

// Run gathers requests into batches and sends each on its own goroutine
// until ctx ends; then it waits for the batches in flight.
func (e *Edge) Run(ctx context.Context) {
	var flight sync.WaitGroup
	defer flight.Wait()
	var carry *pending // the request that did not fit the last batch
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case <-ctx.Done():
				return
			case first = <-e.in:
			}
		}
		batch, size := []*pending{first}, RequestSize(first.req)
		timer := time.NewTimer(e.cfg.Wait)
	gather:
		for len(batch) < e.cfg.Batch {
			select {
			case p := <-e.in:
				if size+RequestSize(p.req) > MaxBatchBytes {
					carry = p
					break gather
				}
				batch, size = append(batch, p), size+RequestSize(p.req)
			case <-timer.C:
				break gather
			case <-ctx.Done():
				break gather
			}
		}
		timer.Stop()
		for _, b := range e.split(batch) {
			flight.Go(func() { e.send(context.WithoutCancel(ctx), b.route, b.pending) }) // a batch sent is answered, even as the edge stops
		}
	}
}

// Relay hands req to a full node and returns its answer. It never waits
// longer than the edge's deadline (and the gathering): with no full node
// reachable the answer is 503 unavailable, with Retry-After.
func (e *Edge) Relay(ctx context.Context, req Request) Answer {
	req, refused := fit(req)
	if refused != nil {
		return ErrorAnswer(refused)
	}
	p := &pending{req: req, key: affinityKey(req), done: make(chan Answer, 1)}
	t := time.NewTimer(e.cfg.Deadline)
	defer t.Stop()
	select {
	case e.in <- p:
	case <-t.C:
		return unavailable("the edge's relay queue is full")
	case <-ctx.Done():
		return unavailable("the request ended")
	}
	select {
	case a := <-p.done:
		return a
	case <-ctx.Done():
		return unavailable("the request ended")
	}
}

// send relays one batch along its route, failing over, and answers its
// clients.
func (e *Edge) send(ctx context.Context, route []string, batch []*pending) {
	reqs := make([]Request, len(batch))
	for i, p := range batch {
		reqs[i] = p.req
	}
	answers, err := e.exchange(ctx, route, reqs)
	if err != nil {
		if ok, n := e.lostLog.allow(time.Now()); ok {
			e.cfg.Logger.Warn("relay: batch not answered", "requests", len(batch), "err", err, "suppressed", n)
		}
		a := unavailable("no full node answered in time; try again")
		for _, p := range batch {
			p.done <- a
		}
		return
	}
	for i, p := range batch {
		p.done <- answers[i]
	}
}

// errNoFullNode is why a batch went unanswered.
var errNoFullNode = errors.New("relay: no full node answered")

// exchange sends one batch until a full node answers or the deadline
// passes: to each subject of route in turn, round again while time is
// left. A resend carries the same requests (the same idempotency keys):
// a full node that died mid-batch counts nothing twice. The route ends
// with the shared queue group, where NATS picks any full node — of the
// edge's own region while it has one, then of another (a gateway).
func (e *Edge) exchange(ctx context.Context, route []string, reqs []Request) ([]Answer, error) {
	deadline := time.Now().Add(e.cfg.Deadline)
	// A full node starts it by then or not at all, so that what it
	// ledgers it answers before the clients hear 503 (startMargin for the
	// commit and the way back; wall clocks, kept on NTP).
	msg := e.cfg.Seal(AppendBatchBy(nil, deadline.Add(-min(startMargin, e.cfg.Deadline/4)).UnixMilli(), reqs))
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	e.cfg.Metrics.batch(len(reqs))
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			e.cfg.Metrics.resend()
		}
		nc := e.cfg.Conn()
		if nc == nil || !nc.IsConnected() {
			last = errors.New("relay: not connected to NATS")
		} else {
			actx, acancel := context.WithTimeout(ctx, e.cfg.Attempt)
			e.cfg.Metrics.moved("out", len(msg))
			reply, err := nc.RequestWithContext(actx, route[attempt%len(route)], msg)
			acancel()
			if err == nil {
				e.cfg.Metrics.moved("in", len(reply.Data))
				body, err := e.cfg.Open(reply.Data)
				if err == nil {
					return DecodeAnswers(body, len(reqs))
				}
				last = err
			} else {
				last = err
			}
		}
		if (attempt+1)%len(route) != 0 && ctx.Err() == nil {
			continue // the next full node of the route at once
		}
		// Round the route again after a pause (a full node may be
		// reconnecting), never past the deadline.
		pause := time.Duration(min(attempt/len(route)+1, 5)) * 20 * time.Millisecond
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w (last: %w)", errNoFullNode, ctx.Err(), last)
		case <-time.After(pause):
		}
	}
}

// unavailable is the edge's own answer when no full node answered.
func unavailable(msg string) Answer {
	e := api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "%s", msg)
	e.RetryAfter = time.Second
	return ErrorAnswer(e)
}

// fit holds a request to what a relay message carries, so one client
// cannot make the batch it shares with others undecodable: a poll id that
// cannot be is answered here as a full node answers it (404), an
// overlong token is refused, an overlong User-Agent is cut.
func fit(req Request) (Request, *api.Error) {
	switch {
	case req.Kind == KindVote && ids.Valid(req.Poll) != nil:
		return req, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", req.Poll)
	case len(req.Body) > MaxBody:
		return req, api.Errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "body larger than %d bytes", MaxBody)
	case len(req.Sender.Token) > maxToken:
		return req, api.Errorf(http.StatusUnauthorized, api.CodeSessionInvalid, "session: malformed token") // as a full node says
	case len(req.Sender.IP) > maxIP:
		return req, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "client address too long")
	}
	if len(req.Sender.UserAgent) > MaxUserAgent {
		req.Sender.UserAgent = req.Sender.UserAgent[:MaxUserAgent]
	}
	return req, nil
}

// ErrorAnswer is the Answer of an API error, as the full node writes it.
func ErrorAnswer(e *api.Error) Answer {
	var body api.ErrorBody
	body.Error.Code, body.Error.Message = e.Code, e.Message
	b, _ := json.Marshal(body)
	return Answer{Status: e.Status, RetryAfter: e.RetryAfter, Body: b}
}

// Vote relays a vote that came on a live socket: it is fanout's Voter at
// an edge. The full node's success answer is returned as raw JSON, its
// refusal as the *api.Error it was.
func (e *Edge) Vote(poll string, body []byte, s api.Sender) (any, error) {
	if int64(len(body)) > e.cfg.MaxBody {
		return nil, api.Errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "body larger than %d bytes", e.cfg.MaxBody)
	}
	a := e.Relay(context.Background(), Request{Kind: KindVote, Poll: poll, Body: body, Sender: s})
	if a.Status == http.StatusOK {
		return json.RawMessage(a.Body), nil
	}
	return nil, a.Err()
}

// Err is the *api.Error a refusal answer carries.
func (a Answer) Err() *api.Error {
	var body api.ErrorBody
	if err := json.Unmarshal(a.Body, &body); err != nil || body.Error.Code == "" {
		return api.Errorf(http.StatusBadGateway, api.CodeInternal, "the full node's answer could not be read")
	}
	e := api.Errorf(a.Status, body.Error.Code, "%s", body.Error.Message)
	e.RetryAfter = a.RetryAfter
	return e
}

// HandleVotes serves POST /v1/polls/{poll}/votes at an edge.
func (e *Edge) HandleVotes(w http.ResponseWriter, r *http.Request) {
	received := e.cfg.Now().UnixMilli() // a quiz answer's time ends here, on the edge's clock
	body, err := api.ReadBody(w, r, e.cfg.MaxBody)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	s := api.HTTPSender(e.cfg.ClientIP(r), r.UserAgent(), r.Header.Get(api.SessionHeader), received)
	e.write(w, e.Relay(r.Context(), Request{Kind: KindVote, Poll: r.PathValue("poll"), Body: body, Sender: s}))
}

// HandleSession serves POST /v1/session at an edge: the puzzle and the
// token come from a full node, which holds the cluster's token budgets.
func (e *Edge) HandleSession(w http.ResponseWriter, r *http.Request) {
	body, err := api.ReadBody(w, r, 1024)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	s := api.HTTPSender(e.cfg.ClientIP(r), r.UserAgent(), "", e.cfg.Now().UnixMilli())
	e.write(w, e.Relay(r.Context(), Request{Kind: KindSession, Body: body, Sender: s}))
}

func (e *Edge) write(w http.ResponseWriter, a Answer) {
	if a.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(max(int((a.RetryAfter+time.Second-1)/time.Second), 1)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.Status)
	w.Write(a.Body)
}
