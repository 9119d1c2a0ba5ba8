package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	// those of the edge's own region, then the others. Of them, a request
	// goes to those the edge heard ready within Stale (presence.go), its
	// region's first: to the one its voter ranks first (rendezvous
	// hashing of affinityKey), so a retry through any edge reaches the
	// node that answered it first, and a voter's change of mind the node
	// that counted them; the rest are its failover order. nil: only
	// the shared queue group.
	FullNodes func() (region, others []string)
	// Stale is how long after a full node's last word (presence.go) the
	// edge stops relaying to it; default 4 × PresenceEvery (1 s).
	Stale time.Duration
	// Seal and Open authenticate relay messages with the cluster's
	// keyring (package gossip's); nil: passed as they are (tests).
	Seal func([]byte) []byte
	Open func([]byte) ([]byte, error)
	// Wait is how long a batch gathers requests after its first while no
	// other batch is in flight; default 2 ms. While one is, the next
	// gathers for about the full nodes' measured reply time, up to
	// MaxWait (default 20 ms): a busy full node gets fuller messages.
	Wait, MaxWait time.Duration
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
	// CheckVotes refuses votes for options their poll does not have, from
	// the edge's replicated definitions, as a full node would (422
	// invalid_option), and what else the edge can tell already (the node's
	// refuses a quiz answer's name that looks like another participant's);
	// it lets through the votes of a poll it does not know yet. nil: the
	// full node checks alone.
	CheckVotes func(poll string, votes []api.Vote) error
	// Receipts says whether every full node reads TRQ5 — relays proofs,
	// answers receipts (cluster protocol 3 or later) — so the edge may
	// send it; else it sends TRQ4, which a full node of the release
	// before reads, its votes' answers carry no receipts and proofs are
	// refused 503 (proof.go). nil: never.
	Receipts func() bool
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
	// badLog throttles the warning about answers not believed.
	badLog throttle
	// pace is the full nodes' measured reply time, which sets the batch
	// window; inFlight counts the batches sent and not yet answered.
	pace     pace
	inFlight atomic.Int64
	// roster is what the full nodes said of themselves (presence.go);
	// targets are the ones the edge relays to now (Targets).
	roster   roster
	targetMu sync.Mutex
	targets  []Target
	changed  chan struct{} // closed when the targets change (retargeted)
	heardNew chan struct{} // a full node's word changed its standing: retarget now
	// link counts the moves of the edge's NATS link (LinkMoved): an
	// attempt sent before the last one is lost.
	link atomic.Uint64
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
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 20 * time.Millisecond
	}
	cfg.MaxWait = max(cfg.MaxWait, cfg.Wait)
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
	if cfg.Stale <= 0 {
		cfg.Stale = 4 * PresenceEvery
	}
	if cfg.Receipts == nil {
		cfg.Receipts = func() bool { return false }
	}
	return &Edge{cfg: cfg, in: make(chan *pending, 4*MaxBatch), changed: make(chan struct{}), heardNew: make(chan struct{}, 1), lostLog: throttle{every: 5 * time.Second}, badLog: throttle{every: 10 * time.Second}}
}

// Run gathers requests into batches and sends each on its own goroutine,
// and listens to the full nodes' presence, until ctx ends; then it waits
// for the batches in flight.
func (e *Edge) Run(ctx context.Context) {
	var flight sync.WaitGroup
	defer flight.Wait()
	flight.Go(func() { e.watch(ctx) })
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
		timer := time.NewTimer(e.window())
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
			e.inFlight.Add(1)
			flight.Go(func() { // a batch sent is answered, even as the edge stops
				defer e.inFlight.Add(-1)
				e.send(context.WithoutCancel(ctx), b, b.pending)
			})
		}
	}
}

// window is how long the next batch gathers: Wait with no batch in
// flight, else about the measured reply time (pace).
func (e *Edge) window() time.Duration {
	if e.inFlight.Load() == 0 {
		return e.cfg.Wait
	}
	w := e.pace.window(e.cfg.Wait, e.cfg.MaxWait)
	e.cfg.Metrics.window(w)
	return w
}

// Relay hands req to a full node and returns its answer. It never waits
// longer than the edge's deadline (and the gathering): with no full node
// reachable the answer is 503 unavailable, with Retry-After.
//
// A vote request's Votes are relayed; one with a Body instead has it
// decoded here (api.DecodeVotes), refused if it does not decode.
func (e *Edge) Relay(ctx context.Context, req Request) Answer {
	req, refused := fit(req)
	if refused != nil {
		return ErrorAnswer(refused)
	}
	if req.Kind == KindVote && req.Votes == nil {
		votes, err := api.DecodeVotes(req.Body)
		if err != nil {
			return ErrorOf(err, e.cfg.Logger)
		}
		req.Votes, req.Body = votes, nil
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
// clients: the full node's answers, or the edge's own when none came —
// 503 unavailable if no full node can have taken the batch, 504
// outcome_unknown if one may have.
//
// It asks Receipts once: the batch goes as TRQ5, or as TRQ4 without its
// proof requests, which are answered 503 here (proofsRefused).
func (e *Edge) send(ctx context.Context, r routed, batch []*pending) {
	magic := batchMagic
	if !e.cfg.Receipts() {
		magic, batch = batchMagicV4, proofsRefused(batch)
		if len(batch) == 0 {
			return
		}
	}
	reqs := make([]Request, len(batch))
	for i, p := range batch {
		reqs[i] = p.req
	}
	answers, err := e.exchange(ctx, r, magic, reqs)
	if err != nil {
		if ok, n := e.lostLog.allow(time.Now()); ok {
			e.cfg.Logger.Warn("relay: batch not answered", "requests", len(batch), "err", err, "suppressed", n)
		}
		a := unavailable("no full node answered in time; try again")
		outcome := "unavailable"
		if errors.Is(err, errOutcomeUnknown) {
			a, outcome = outcomeUnknown(), "unknown"
		}
		e.cfg.Metrics.unanswered(outcome, len(batch))
		for _, p := range batch {
			if p.req.Kind == KindProof && outcome == "unknown" {
				p.done <- unavailable("no full node answered in time; try again") // a read: nothing to resolve
				continue
			}
			p.done <- a
		}
		return
	}
	for i, p := range batch {
		p.done <- answers[i]
	}
}

var (
	// errNoFullNode: no full node took the batch (none was reachable, or
	// NATS said no one listens), so nothing of it was ledgered.
	errNoFullNode = errors.New("relay: no full node answered")
	// errOutcomeUnknown: a full node may have taken the batch (it reached
	// one) but no answer came before the deadline.
	errOutcomeUnknown = errors.New("relay: a full node may have taken the batch but did not answer in time")
)

// exchange sends one batch until a full node answers or the deadline
// passes: to each subject of route in turn, round again while time is
// left. A resend carries the same requests (the same idempotency keys):
// a full node that died mid-batch counts nothing twice. The route ends
// with the shared queue group, where NATS picks any full node — of the
// edge's own region while it has one, then of another (a gateway).
//
// Every attempt's reply is listened for until the deadline, not only the
// latest one's: a full node that stalled and resumes answers the batch
// it took, and that answer is the one its clients get. An attempt NATS
// answers "no responders" reached no one; any other attempt without an
// answer may have been taken, and then the batch's outcome is unknown
// (errOutcomeUnknown) rather than a refusal.
//
// When the full nodes to relay to change while an attempt waits (the one
// it went to fell silent: presence.go), the batch goes on at once along
// its route as it is now, not after the attempt's time.
func (e *Edge) exchange(ctx context.Context, r routed, magic string, reqs []Request) ([]Answer, error) {
	route := r.route
	deadline := time.Now().Add(e.cfg.Deadline)
	// A full node starts it by then or not at all, so that what it
	// ledgers it answers before the edge gives up (startMargin for the
	// commit and the way back; wall clocks, kept on NTP).
	msg := e.cfg.Seal(appendBatch(nil, magic, deadline.Add(-min(startMargin, e.cfg.Deadline/4)).UnixMilli(), reqs))
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	e.cfg.Metrics.batch(len(reqs))
	x := &exchange{edge: e, msg: msg, reqs: reqs, replies: make(chan *nats.Msg, 2*len(route)+4)}
	defer x.close()
	var last error
	// In the deadline's last moments no new attempt starts: one that did
	// would have no time for even NATS's "no responders", and then a batch
	// that reached no full node would be answered 504 outcome_unknown
	// instead of 503. The attempts in flight are heard out instead.
	quiet := min(100*time.Millisecond, e.cfg.Deadline/5)
	next, rounds := 0, 0 // the next subject of route; rounds of it done
	for attempt := 0; ; attempt++ {
		if attempt > 0 && time.Until(deadline) < quiet {
			for len(x.sent) > 0 && ctx.Err() == nil {
				if answers, _ := x.listen(ctx, nil); answers != nil {
					return answers, nil
				}
			}
			break
		}
		if attempt > 0 {
			e.cfg.Metrics.resend()
		}
		subject := route[next]
		if err := x.send(subject, attempt); err != nil {
			last = err
		} else if answers, moved, err := x.wait(ctx, attempt, subject, r.key); answers != nil {
			return answers, nil
		} else if moved != nil {
			route, next = moved, 0 // its subject fell out of the route
			continue
		} else if err != nil {
			last = err
		}
		if ctx.Err() != nil {
			break
		}
		if next++; next < len(route) {
			continue // the next full node of the route at once
		}
		// Round the route again after a pause (a full node may be
		// reconnecting), never past the deadline, still listening.
		next, rounds = 0, rounds+1
		pause := time.NewTimer(time.Duration(min(rounds, 5)) * 20 * time.Millisecond)
		answers, _ := x.listen(ctx, pause.C)
		pause.Stop()
		if answers != nil {
			return answers, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	// The loop may end in the deadline's quiet moments, before ctx does.
	last = cmp.Or(last, ctx.Err(), context.DeadlineExceeded)
	if x.mayBeTaken() {
		return nil, fmt.Errorf("%w (last: %w)", errOutcomeUnknown, last)
	}
	return nil, fmt.Errorf("%w (last: %w)", errNoFullNode, last)
}

// exchange is one batch's attempts: each is published with its own reply
// subject under one inbox, so a late answer to any of them is heard.
type exchange struct {
	edge    *Edge
	msg     []byte
	reqs    []Request // what the answers are to
	nc      *nats.Conn
	sub     *nats.Subscription
	inbox   string
	replies chan *nats.Msg
	sent    map[int]bool // attempts published and not answered "no responders"
	sentAt  map[int]time.Time
	links   map[int]uint64 // the edge's link when each attempt went out (Edge.link)
}

// send publishes attempt n to subject, subscribing to the inbox first.
func (x *exchange) send(subject string, n int) error {
	nc := x.edge.cfg.Conn()
	if nc == nil || !nc.IsConnected() {
		return errors.New("relay: not connected to NATS")
	}
	if x.sub == nil || x.nc != nc {
		if x.sub != nil {
			x.sub.Unsubscribe()
		}
		x.nc, x.inbox = nc, nc.NewRespInbox()
		sub, err := nc.ChanSubscribe(x.inbox+".*", x.replies)
		if err != nil {
			return fmt.Errorf("relay: cannot listen for the answer: %w", err)
		}
		x.sub = sub
	}
	x.edge.cfg.Metrics.moved("out", len(x.msg))
	if err := nc.PublishRequest(subject, x.inbox+"."+strconv.Itoa(n), x.msg); err != nil {
		return err
	}
	if x.sent == nil {
		x.sent, x.sentAt, x.links = map[int]bool{}, map[int]time.Time{}, map[int]uint64{}
	}
	x.sent[n], x.sentAt[n], x.links[n] = true, time.Now(), x.edge.link.Load()
	return nil
}

// wait listens for an answer until attempt n's time is up, or until NATS
// says that attempt reached no one. When the edge's targets change and
// the route of key no longer starts with the attempt's subject, or the
// edge's NATS link moved since the attempt went out on it (the attempt
// is lost: LinkMoved), it stops waiting and returns the route as it is
// now (moved).
func (x *exchange) wait(ctx context.Context, n int, subject, key string) (answers []Answer, moved []string, err error) {
	t := time.NewTimer(x.edge.cfg.Attempt)
	defer t.Stop()
	changed := x.edge.retargeted()
	for {
		answers, err := x.listenUntil(ctx, t.C, changed)
		switch {
		case errors.Is(err, errRetargeted):
			changed = x.edge.retargeted()
			if route := x.edge.reroute(key); route[0] != subject || x.edge.link.Load() != x.links[n] {
				return nil, route, nil
			}
			// still first, on the same link: listen on
		case errors.Is(err, nats.ErrNoResponders):
			if !x.sent[n] {
				return nil, nil, err // this attempt reached no one: the next at once
			}
			// an earlier attempt's: listen on
		case answers != nil:
			return answers, nil, nil
		default:
			return nil, nil, nil // time is up
		}
	}
}

// errRetargeted is listenUntil's word that the edge's targets changed.
var errRetargeted = errors.New("relay: the full nodes to relay to changed")

// listen returns the first answer that arrives before stop or the
// deadline, or nats.ErrNoResponders when an attempt reached no one (that
// attempt no longer counts as taken). It returns nil, nil on stop. An
// answer that does not open or decode is not believed: it is logged and
// listening goes on (the batch may have been taken all the same).
func (x *exchange) listen(ctx context.Context, stop <-chan time.Time) ([]Answer, error) {
	return x.listenUntil(ctx, stop, nil)
}

// listenUntil is listen that also returns errRetargeted when changed is
// closed.
func (x *exchange) listenUntil(ctx context.Context, stop <-chan time.Time, changed <-chan struct{}) ([]Answer, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, nil
		case <-stop:
			return nil, nil
		case <-changed:
			return nil, errRetargeted
		case m := <-x.replies:
			n, nerr := strconv.Atoi(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:])
			if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
				if nerr == nil {
					delete(x.sent, n)
				}
				return nil, nats.ErrNoResponders
			}
			x.edge.cfg.Metrics.moved("in", len(m.Data))
			body, err := x.edge.cfg.Open(m.Data)
			if err == nil {
				var answers []Answer
				if answers, err = DecodeAnswers(body, x.reqs); err == nil {
					if at, ok := x.sentAt[n]; ok && nerr == nil {
						x.edge.pace.observe(time.Since(at)) // this attempt's own reply time
					}
					if nerr != nil || x.othersMayHaveTaken(n) {
						unknownWhereLocal(answers)
					}
					return answers, nil
				}
			}
			if ok, n := x.edge.badLog.allow(time.Now()); ok {
				x.edge.cfg.Logger.Warn("relay: an answer that does not open or decode, not believed", "err", err, "suppressed", n)
			}
		}
	}
}

// othersMayHaveTaken reports whether an attempt other than n may have
// reached a full node (perhaps another one than n's).
func (x *exchange) othersMayHaveTaken(n int) bool {
	for k := range x.sent {
		if k != n {
			return true
		}
	}
	return false
}

// unknownWhereLocal turns into outcome_unknown every answer that speaks
// only for the full node that gave it — 503 (starting, catching up,
// records lost) and 429 — when another full node may have taken the same
// batch: that one may have ledgered the vote the client would be told was
// refused (found by the fault-injection test: a restarted node's "catching
// up" 503 reached the client first, while the node that had stalled with
// the batch ledgered it). A retry with the same key gets the real answer.
// Refusals any full node gives alike (a bad option, a closed poll) stand.
func unknownWhereLocal(answers []Answer) {
	for i, a := range answers {
		if a.Err != nil && (a.Err.Status >= 500 || a.Err.Status == http.StatusTooManyRequests) {
			answers[i] = outcomeUnknown()
		}
	}
}

// mayBeTaken reports whether an attempt may have reached a full node.
func (x *exchange) mayBeTaken() bool { return len(x.sent) > 0 }

func (x *exchange) close() {
	if x.sub != nil {
		x.sub.Unsubscribe()
	}
}

// outcomeUnknown is the edge's own answer when a full node may have
// taken the batch but did not answer in time: the client sends the same
// request again (the same key) to learn its outcome.
func outcomeUnknown() Answer {
	e := api.Errorf(http.StatusGatewayTimeout, api.CodeOutcomeUnknown,
		"a full node took this request but did not answer in time, so it may or may not have been counted: send the same request again, with the same idempotency key, for its answer")
	e.RetryAfter = time.Second
	return ErrorAnswer(e)
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
	case (req.Kind == KindVote || req.Kind == KindProof) && ids.Valid(req.Poll) != nil:
		return req, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", req.Poll)
	case req.Kind == KindProof && !validLeaf(string(req.Body)):
		return req, errLeaf()
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

// Vote relays a vote that came on a live socket: it is fanout's Voter at
// an edge. It returns the full node's answer as the full node's pipeline
// gave it: the response, or the refusal (an *api.Error).
func (e *Edge) Vote(poll string, body []byte, s api.Sender) (api.VoteResponse, error) {
	req, err := e.voteRequest(poll, body, s)
	if err != nil {
		return api.VoteResponse{}, err
	}
	a := e.Relay(context.Background(), req)
	switch {
	case a.Err != nil:
		return api.VoteResponse{}, a.Err
	case a.Vote == nil:
		return api.VoteResponse{}, errEmptyAnswer
	}
	return *a.Vote, nil
}

// voteRequest is a vote request the edge decoded and checked as a full
// node would (api.DecodeVotes, CheckVotes), to relay in binary; or the
// refusal the client gets from the edge, which a full node would have
// given it alike — nothing is relayed.
func (e *Edge) voteRequest(poll string, body []byte, s api.Sender) (Request, error) {
	if int64(len(body)) > e.cfg.MaxBody {
		return Request{}, api.Errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "body larger than %d bytes", e.cfg.MaxBody)
	}
	if err := ids.Valid(poll); err != nil {
		return Request{}, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", poll)
	}
	votes, err := api.DecodeVotes(body)
	if err != nil {
		return Request{}, err
	}
	if e.cfg.CheckVotes != nil {
		if err := e.cfg.CheckVotes(poll, votes); err != nil {
			return Request{}, err
		}
	}
	return Request{Kind: KindVote, Poll: poll, Votes: votes, Sender: s}, nil
}

// Participant checks a quiz join's voter token at a full node of the
// region, which holds the session secret and the token budgets the
// edge does not: it is fanout's Participant at an edge. A token too
// long to be one joins unverified (under the id it sent, not counted).
// A join whose check gets no answer is refused with the error (503: try
// again), never taken as unverified: the participant would see another
// voter's standing, and the join would not count, on a network blip.
func (e *Edge) Participant(token, userAgent, ip string) (voter string, counted bool, err error) {
	if len(userAgent) > MaxUserAgent {
		userAgent = userAgent[:MaxUserAgent]
	}
	if len(token) > maxToken || len(ip) > maxIP {
		return "", false, nil
	}
	a := e.Relay(context.Background(), Request{Kind: KindJoin, Sender: api.Sender{IP: ip, UserAgent: userAgent, Token: token}})
	switch {
	case a.Err != nil:
		return "", false, a.Err
	case a.Join == nil:
		return "", false, unavailable("no full node checked the join").Err
	}
	return a.Join.Voter, a.Join.Counted, nil
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
	req, err := e.voteRequest(r.PathValue("poll"), body, s)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	e.Relay(r.Context(), req).WriteHTTP(w)
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
	e.Relay(r.Context(), Request{Kind: KindSession, Body: body, Sender: s}).WriteHTTP(w)
}
