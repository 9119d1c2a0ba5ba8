package certify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tally/api"
	"tally/hlc"
	"tally/internal/rendezvous"
	"tally/ledger"
	"tally/state"
)

var (
	// ErrIncomplete is returned when a certification attempt ends pending.
	ErrIncomplete = errors.New("certify: incomplete")
	// ErrNotClosed is returned for a poll still open or in its grace window.
	ErrNotClosed = errors.New("certify: poll not closed past its grace window")
	// ErrDecision is returned for an operator's decision that does not fit
	// the poll (a replica it does not have, nothing lost to accept); no
	// certificate is written.
	ErrDecision = errors.New("certify: decision does not fit the poll")
)

// Peer is a cluster member as certification needs it.
type Peer struct {
	Name     string
	Replica  string
	HTTPAddr string
	HTTPS    bool // HTTPAddr serves TLS only
	Full     bool // takes votes (edge nodes hold no ledger of their own)
	// CopyOf, when set, reads the copy this node keeps of that replica's
	// chain (its buddy's copy) instead of its own records (fromcopy.go).
	CopyOf string
	// Holder, with CopyOf, is this node's own replica id: a copy refused
	// is named by its holder.
	Holder string
}

// Fetcher opens a peer's export of one poll's records (the binary stream
// or NDJSON): its own chain above seq after. It may hand over more (the
// whole chain, other replicas' records): what is already copied must
// match, the rest is skipped. With a fence (not zero) the peer first
// makes its ledger final up to that time (ingest's Pipeline.Fence), so no
// record of the poll lands there after the ones it hands over.
type Fetcher func(ctx context.Context, p Peer, poll string, after uint64, fence hlc.Timestamp) (io.ReadCloser, error)

// Config configures a Certifier. Zero durations mean the defaults.
type Config struct {
	State   *state.State   // required
	Ledger  *ledger.Ledger // required: this replica's records
	Replica string         // this node's replica id
	Name    string         // this node's name
	Full    bool           // this node takes votes (may coordinate)
	Peers   func() []Peer  // live members, this node included
	// Synced reports whether this node's view of the cluster is complete
	// enough to certify (it merged a peer's full state); nil: always.
	Synced func() bool
	Fetch  Fetcher // nil: HTTP with the cluster credential
	// Probe looks at a member's HTTP port (gone.go): nil, an answer; an
	// error wrapping syscall.ECONNREFUSED, nothing listens there. nil:
	// GET /readyz over HTTP.
	Probe func(ctx context.Context, p Peer) error
	// Ballots applies the ballots of another replica's records (as a
	// buddy applies those of the copies it takes): certification gives it
	// the records of each replica it read from a copy, which this node may
	// not hold the ballots of (ballots.go). nil: none applied.
	Ballots func(recs []ledger.Record)
	// Fence makes this node's own ledger final for a poll before its
	// records are read at close (ingest's Pipeline.Fence); nil: none.
	Fence func(poll string, wall int64) error
	// Client makes the HTTP fetch (TLS settings for peers); nil:
	// http.DefaultClient.
	Client *http.Client
	// PeerHeader and PeerToken are the header and the cluster credential
	// the HTTP fetch sends (never the admin token).
	PeerHeader, PeerToken string
	Clock                 interface{ Now() (hlc.Timestamp, error) }
	// Sign signs a certificate's SigningBytes with this replica's key; nil:
	// certificates go unsigned (and other nodes drop them).
	Sign       func([]byte) []byte
	TrustFloor float64

	// Prefetch is how many records this node may hold copied from every
	// replica's chain of the polls that run (prefetch.go), so that at close
	// only the tail is read; 0: none, every chain is read whole at close.
	Prefetch      int
	PrefetchEvery time.Duration // how often the copies are topped up while polls run; default 1s

	Every         time.Duration // how often the loop looks; default 100ms
	Settle        time.Duration // after close + grace, for the last counts to spread; default 250ms
	TakeoverAfter time.Duration // each later rank waits this much more; default 5s
	Retry         time.Duration // between attempts at one poll; default 2s

	Logger     *slog.Logger
	Now        func() time.Time
	Registerer prometheus.Registerer // nil: metrics not registered
}

// Certifier certifies closed polls. Run drives it; Certify is one attempt.
type Certifier struct {
	cfg      Config
	log      *slog.Logger
	attempts *prometheus.CounterVec // by outcome
	seconds  *prometheus.HistogramVec

	lbMu    sync.Mutex
	lbCache map[string]rankingCache // quiz → its ranking (leaderboard.go)

	mu       sync.Mutex
	dueSince map[string]time.Time // poll → when this node first saw it due (monotonic)
	lastTry  map[string]time.Time // poll → last attempt (monotonic)

	pendingLog pendingLog // when a pending reason is logged

	members *members    // the live members less those gone by their refusals (gone.go)
	keys    *copiedKeys // the ballots of replicas certified from copies (ballots.go)

	copies         *copies                // the replicas' chains of the polls that run (copies.go)
	proofs         *proofs                // certified polls' trees, for voters' proofs (proofs.go)
	proofsM        *prometheus.CounterVec // proofs asked, by outcome
	merges         *prometheus.CounterVec // by how: incremental, whole
	prefetchErrors prometheus.Counter
	budgetLogged   atomic.Bool // the prefetch budget's warning is written once
}

// The defaults of Config's zero durations.
const (
	DefaultSettle        = 250 * time.Millisecond // after close + grace, for the last counts to spread
	DefaultTakeoverAfter = 5 * time.Second        // each later rank of a poll's coordinator order waits this much more
)

// New checks cfg.
func New(cfg Config) (*Certifier, error) {
	if cfg.State == nil || cfg.Ledger == nil || cfg.Peers == nil || cfg.Clock == nil {
		return nil, errors.New("certify: State, Ledger, Peers and Clock are required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Every, 100*time.Millisecond)
	def(&cfg.Settle, DefaultSettle)
	def(&cfg.TakeoverAfter, DefaultTakeoverAfter)
	def(&cfg.Retry, 2*time.Second)
	def(&cfg.PrefetchEvery, time.Second)
	if cfg.Prefetch < 0 {
		return nil, fmt.Errorf("certify: Prefetch %d: want 0 or more records", cfg.Prefetch)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Certifier{cfg: cfg, log: cfg.Logger.With("component", "certify"), lastTry: map[string]time.Time{}, dueSince: map[string]time.Time{},
		copies:  newCopies(cfg.Prefetch),
		proofs:  newProofs(time.Now),
		members: &members{self: cfg.Replica, mono: time.Now},
		keys:    &copiedKeys{st: cfg.State, apply: cfg.Ballots, retry: cfg.Retry, done: map[string]hlc.Timestamp{}, try: map[string]time.Time{}}}
	c.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tally_certify_attempts_total",
		Help: "Certification attempts by outcome: reconciled, pending, error, panic; withdrawn: a reconciled certificate held here that leaves out records this node knows of, dropped to certify again.",
	}, []string{"outcome"})
	c.seconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tally_certify_duration_seconds",
		Help:    "Time one certification attempt took (collecting every replica's records and reconciling them), by outcome: reconciled, pending, error.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
	}, []string{"outcome"})
	c.prefetchErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tally_certify_prefetch_errors_total",
		Help: "Failed top-ups of this node's copies of other replicas' chains while their polls run (a peer unreachable or its export refused); certification reads what is missing at close.",
	})
	c.merges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tally_certify_merges_total",
		Help: "Exact merges certification made, by how: incremental (the copies' merge kept while the poll ran, finished at close) or whole (every collected record merged at close: no prefetch, a copy read again, a replica excluded).",
	}, []string{"how"})
	c.proofsM = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tally_proofs_total",
		Help: "Voters' proofs asked of this node (GET /v1/polls/{poll}/proofs/{leaf}, at a full node or relayed by an edge), by outcome: proved; leaf_not_found; not_certified; invalid (a malformed leaf); unavailable (the certified records not indexed: being read, not reading back as certified, or two other polls' indexes kept); refused (no such poll, or hidden).",
	}, []string{"outcome"})
	c.proofs.built = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tally_proof_index_builds_total",
		Help: "Indexes of certified polls' records built for voters' proofs, by outcome: built, failed (the records could not be read back, or did not make the certified counts and root: see the log).",
	}, []string{"outcome"})
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tally_certify_prefetched_records",
		Help: "Records this node holds copied from every replica's chain of the polls that run or wait to be certified, so that certification at close reads only the tail (at most --certify-prefetch while the polls run).",
	}, func() float64 { return float64(c.copies.size()) })
	if cfg.Registerer != nil {
		for _, m := range []prometheus.Collector{c.attempts, c.seconds, c.prefetchErrors, c.merges, held, c.proofsM, c.proofs.built} {
			if err := cfg.Registerer.Register(m); err != nil {
				return nil, fmt.Errorf("certify: cannot register metrics: %w", err)
			}
		}
	}
	if c.cfg.Fetch == nil {
		c.cfg.Fetch = c.fetchHTTP
	}
	c.members.list = func() []Peer { return c.cfg.Peers() }
	if c.cfg.Probe == nil {
		c.cfg.Probe = func(ctx context.Context, p Peer) error { return probeHTTP(ctx, c.client(), p) }
	}
	return c, nil
}

// Order returns replicas in the poll's rendezvous order: the coordinator
// first, then who takes over. Every node computes the same order from the
// same members.
func Order(poll string, replicas []string) []string {
	return rendezvous.Rank(poll, replicas)
}

// Run looks for polls to certify every cfg.Every, and tops up the copies
// of the polls that run every cfg.PrefetchEvery, until ctx is done; it
// returns once the proof indexes being built are (proofs.go).
func (c *Certifier) Run(ctx context.Context) {
	defer c.proofs.stop() // after the attempts: the index builds they started
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.prefetch(ctx) })
	if c.cfg.Full {
		wg.Go(func() { c.members.watch(ctx, c.cfg.Probe, c.awaiting) })
	}
	t := time.NewTicker(c.cfg.Every)
	defer t.Stop()
	re := time.NewTicker(recheckEvery)
	defer re.Stop()
	passed := map[string]uint64{} // poll → known records when its certificate last passed Check
	for {
		select {
		case <-ctx.Done():
			return
		case <-re.C:
			c.recheck(passed)
			c.keys.forget(func(poll string) bool { _, ok := c.cfg.State.Defs.Poll(poll); return ok })
			continue
		case <-t.C:
		}
		polls, copied := c.due()
		for _, poll := range polls {
			c.attempt(ctx, poll)
		}
		for _, poll := range copied {
			c.copiedBallots(ctx, poll)
		}
	}
}

// attempt makes one background attempt at the poll. Whatever goes wrong in
// it, a panic included, stays with that poll: it is logged, counted, written
// as a pending certificate where possible, and retried after cfg.Retry.
func (c *Certifier) attempt(ctx context.Context, poll string) {
	defer func() {
		if v := recover(); v != nil {
			c.attempts.WithLabelValues("panic").Inc()
			c.log.Error("certification attempt panicked; will retry", "poll", poll, "panic", v, "stack", string(debug.Stack()))
			func() {
				defer func() { _ = recover() }() // the pending write itself must not take the loop down
				c.pending(poll, api.ResultDetail{Coordinator: c.cfg.Name, Missing: []api.Missing{{Replica: c.cfg.Replica, Error: fmt.Sprintf("internal error: %v", v)}}})
			}()
		}
	}()
	start := time.Now()
	_, err := c.Certify(ctx, poll, Decisions{})
	outcome := "reconciled"
	switch {
	case err == nil:
	case errors.Is(err, ErrIncomplete):
		outcome = "pending"
	case errors.Is(err, ErrNotClosed):
		return
	default:
		outcome = "error"
		c.log.Warn("certification attempt failed; will retry", "poll", poll, "err", err)
	}
	c.attempts.WithLabelValues(outcome).Inc()
	c.seconds.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
}

// due returns the polls this node should try to certify now: closed past
// grace and settle by the poll's clock, not yet reconciled, and either
// this node coordinates or it has waited its rank's takeover delay since
// it saw the poll due. The order passes over members gone by their
// refusals (gone.go) as over those no longer members: a node after a
// destroyed coordinator does not wait its slot. Delays and retries run
// on this process's monotonic clock, not on wall time. It also returns
// the reconciled polls whose copied replicas' ballots this node may lack
// (copiedBallots).
func (c *Certifier) due() (attempt, copied []string) {
	if !c.cfg.Full || c.cfg.Synced != nil && !c.cfg.Synced() {
		return nil, nil
	}
	now := c.cfg.Now()
	mono := time.Now()
	var replicas []string
	for _, p := range c.members.live() {
		if p.Full {
			replicas = append(replicas, p.Replica)
		}
	}
	var out []string
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.cfg.State.Defs.Polls() {
		if d.ClosesAt == 0 {
			continue
		}
		if cert, ok := c.cfg.State.Defs.Certificate(d.ID); ok && cert.Status == state.Reconciled {
			if c.keys.due(d.ID, cert, mono) {
				copied = append(copied, d.ID)
			}
			continue
		}
		rank := slices.Index(Order(d.ID, replicas), c.cfg.Replica)
		if rank < 0 {
			continue
		}
		if now.UnixMilli() < d.GraceEnd() {
			continue
		}
		// The settle and takeover delays run on this process's clock from
		// when it first saw the poll past grace, so the last record counts
		// have time to arrive whatever the wall clocks say.
		since, ok := c.dueSince[d.ID]
		if !ok {
			since = mono
			c.dueSince[d.ID] = since
		}
		if mono.Sub(since) < c.cfg.Settle+time.Duration(rank)*c.cfg.TakeoverAfter || mono.Sub(c.lastTry[d.ID]) < c.cfg.Retry {
			continue
		}
		c.lastTry[d.ID] = mono
		out = append(out, d.ID)
	}
	return out, copied
}

// Decisions are what an operator decided for one certification: replicas
// left out, and replicas certified with the records they still hold.
type Decisions struct {
	Exclude []api.Exclusion
	// AcceptLost names replicas restored from a backup older than their
	// last acknowledged records: they are certified with what they hold,
	// and the records between are stated lost in the certificate.
	AcceptLost []api.Exclusion
}

// Certify makes one attempt at the poll: it collects every replica's
// records (except the excluded), reconciles them and writes a reconciled
// certificate, or a pending one naming what is missing (and returns
// ErrIncomplete). It is long because each step's refusal writes the
// pending certificate with what the steps before it learnt.
func (c *Certifier) Certify(ctx context.Context, poll string, d Decisions) (state.Certificate, error) {
	exclude := d.Exclude
	def, ok := c.cfg.State.Defs.Poll(poll)
	if !ok {
		return state.Certificate{}, fmt.Errorf("certify: no poll %q", poll)
	}
	if def.ClosesAt == 0 || c.cfg.Now().UnixMilli() < def.GraceEnd() {
		return state.Certificate{}, fmt.Errorf("%w: %q", ErrNotClosed, poll)
	}
	tally, err := c.cfg.State.Tally(poll)
	if err != nil {
		return state.Certificate{}, err
	}
	expected := make(map[string]uint64) // replica → records it holds, as far as we know
	maps.Copy(expected, tally.RecordCounts())
	if n := c.localCount(poll); n > expected[c.cfg.Replica] {
		expected[c.cfg.Replica] = n
	}
	peers := map[string]Peer{}
	for _, p := range c.members.live() {
		peers[p.Replica] = p
	}
	replicas, missing, err := plan(poll, expected, peers, c.cfg.Replica, d)
	if err != nil {
		return state.Certificate{}, err
	}
	for i, m := range missing {
		if c.members.gone(m.Replica) {
			missing[i].Error += ": its node refuses connections"
		}
	}
	var fromCopy []api.CopySource
	if len(missing) > 0 {
		replicas, missing, fromCopy = c.fromCopies(ctx, poll, replicas, missing, peers)
	}
	detail := api.ResultDetail{Excluded: exclude, Coordinator: c.cfg.Name, ClosesAt: def.ClosesAt, Missing: missing, FromCopy: fromCopy}
	if len(detail.Missing) > 0 {
		return c.pending(poll, detail)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var res *ledger.Result
	// The fence: a time past the grace by this node's clock. Every
	// replica read makes its ledger final up to it first, so no record of
	// the poll lands after the ones read, whatever its own clock says.
	fence, err := c.cfg.Clock.Now()
	if err != nil {
		return state.Certificate{}, err
	}
	chains, err := c.collect(ctx, poll, replicas, peers, fence)
	if err == nil {
		var incremental bool
		res, incremental, err = c.reconcile(ledger.ReconcileConfig{Poll: poll, ClosesAt: def.ClosesAt, CloseRule: ledger.CloseByNode, TrustFloor: c.cfg.TrustFloor, FirstWins: def.Quiz != nil}, chains)
		if err == nil {
			c.merges.WithLabelValues(map[bool]string{true: "incremental", false: "whole"}[incremental]).Inc()
		}
	}
	if err != nil {
		detail.Missing = append(detail.Missing, api.Missing{Replica: replicaOf(err), Error: err.Error()})
		return c.pending(poll, detail)
	}
	detail.Lost, detail.Missing, err = judge(poll, expected, replicas, res.Replicas, d.AcceptLost)
	if len(detail.Missing) > 0 {
		return c.pending(poll, detail)
	}
	if err != nil {
		return state.Certificate{}, err
	}
	detail.Result = res
	if detail.Tree, err = c.signTreeHead(poll, chains, res); err != nil {
		return state.Certificate{}, err
	}
	c.pendingLog.forget(poll)
	cert, err := c.write(poll, state.Reconciled, "", detail)
	if err == nil {
		c.keys.hold(replicas, chains, fromCopy)
		c.copies.forget(poll)
		c.proofs.seed(poll, chains)
		c.proofs.warm(poll, cert, *detail.Tree, c.cfg.TrustFloor)
		c.log.Info("poll certified", "poll", poll, "total", res.Total, "records", res.Records, "digest", res.Digest, "excluded", len(exclude), "lost", len(detail.Lost))
	}
	return cert, err
}

// localCount is how many records of the poll this replica's ledger holds.
func (c *Certifier) localCount(poll string) uint64 {
	n, _, err := c.cfg.Ledger.Head(poll, c.cfg.Replica)
	if err != nil {
		c.log.Warn("ledger head", "poll", poll, "err", err)
	}
	return n
}

func (e *staleCopyError) Error() string { return e.err.Error() }
func (e *staleCopyError) Unwrap() error { return e.err }

func (e *replicaError) Error() string { return "replica " + e.replica + ": " + e.err.Error() }
func (e *replicaError) Unwrap() error { return e.err }

func (c *Certifier) pending(poll string, detail api.ResultDetail) (state.Certificate, error) {
	var parts []string
	for _, m := range detail.Missing {
		s := m.Replica + ": " + m.Error
		if m.Expected > 0 {
			s += fmt.Sprintf(" (expected %d records, received %d)", m.Expected, m.Received)
		}
		parts = append(parts, s)
	}
	reason := strings.Join(parts, "; ")
	if held, ok := c.cfg.State.Defs.Certificate(poll); ok && held.Status == state.Pending && held.Reason == reason && held.By == c.cfg.Replica {
		return held, fmt.Errorf("%w: %s", ErrIncomplete, reason) // unchanged: no new write to spread
	}
	if c.pendingLog.should(poll, reason, time.Now()) {
		c.log.Warn("poll certification pending", "poll", poll, "reason", reason)
	}
	cert, err := c.write(poll, state.Pending, reason, detail)
	if err != nil {
		return cert, err
	}
	return cert, fmt.Errorf("%w: %s", ErrIncomplete, reason)
}

func (c *Certifier) write(poll, status, reason string, detail api.ResultDetail) (state.Certificate, error) {
	ts, err := c.cfg.Clock.Now()
	if err != nil {
		return state.Certificate{}, err
	}
	raw, err := json.Marshal(detail)
	if err != nil {
		return state.Certificate{}, err
	}
	cert := state.Certificate{Poll: poll, Status: status, TS: ts, By: c.cfg.Replica, Reason: reason, Detail: raw}
	if r := detail.Result; r != nil {
		cert.Totals, cert.Total, cert.Digest = r.Totals, r.Total, r.Digest
	}
	if c.cfg.Sign != nil {
		cert.Sig = c.cfg.Sign(cert.SigningBytes())
	}
	if _, err := c.cfg.State.Defs.PutCertificate(cert); err != nil {
		return state.Certificate{}, err
	}
	held, _ := c.cfg.State.Defs.Certificate(poll)
	return held, nil
}
