package ingest

import (
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tally/api"
	"tally/crdt"
	"tally/hlc"
	"tally/ledger"
	"tally/poll"
	"tally/state"
)

// Ledger is what the pipeline needs of the vote ledger.
type Ledger interface {
	Append(recs ...ledger.Record) ([]ledger.Appended, error)
	Lookup(poll, idem string) (ledger.VoteID, bool, error)
	// EnsureCopied returns nil once a vote id of this replica is on a
	// second machine (ledger.Copier), copying it if need be: only then is
	// its retry answered from Lookup.
	EnsureCopied(poll string, id ledger.VoteID) error
	Replica() string
	// ScanAfter reads a chain from a seq on: a retry's receipt reads its
	// record back (retryReceipt).
	ScanAfter(poll, replica string, after uint64) iter.Seq2[ledger.Record, error]
	// The durable metadata a poll's fence is kept in (fence.go).
	PutMeta(name string, value []byte) error
	Meta(name string) ([]byte, bool, error)
}

var _ Ledger = (*ledger.Ledger)(nil)

// Limits bound what one client may do. A rate of zero disables that limit.
type Limits struct {
	IPRate     float64 // votes per second per client IP
	IPBurst    int
	VoterRate  float64 // votes per second per voter id
	VoterBurst int
	MaxBody    int64 // bytes in a request body
}

// DefaultLimits are generous enough for a carrier-grade NAT in front of
// many viewers, tight enough to stop one script.
func DefaultLimits() Limits {
	return Limits{IPRate: 200, IPBurst: 400, VoterRate: 2, VoterBurst: 10, MaxBody: 16 << 10}
}

// Config configures a Pipeline. Ledger, State and Clock are required.
type Config struct {
	Ledger Ledger
	State  *state.State
	Clock  *hlc.Clock
	Limits Limits
	// Names vets quiz participants' display names; nil allows any
	// well-formed one.
	Names NameFilter
	// TrustFloor: votes scoring below it (see Score) are ledgered and
	// acknowledged like any other but not counted.
	TrustFloor float64
	// IPSalt salts the client IP hash stored with each vote.
	IPSalt []byte
	// TrustedProxies may set X-Forwarded-For.
	TrustedProxies []netip.Prefix
	// IPv6Prefix groups IPv6 clients for the per-address limits (rates,
	// voter tokens, puzzle difficulty, the trust score's address
	// signals); 0: DefaultIPv6Prefix, 128: every address apart.
	IPv6Prefix int
	// Registerer receives the metrics; nil skips them.
	Registerer prometheus.Registerer
	// Now is the wall clock for rate limits; defaults to time.Now.
	Now func() time.Time
	// CatchingUp, when set and true, holds back new votes (503,
	// Retry-After: 1) while retries of known keys are answered: the node
	// has not yet caught up with the other replicas' ballots after a start.
	CatchingUp func() bool
	// CopyReady, when set and false, refuses new votes (503 no_copy):
	// with two copies before the ack, no second full node is there to
	// hold them (package buddy).
	CopyReady func() bool
	// Sessions configures voter tokens; a nil Signer turns them off.
	Sessions Sessions
	// Datacenters are address ranges of datacenters and proxies: votes
	// from them score low.
	Datacenters []netip.Prefix
	// SignReceipt signs a vote's receipt (receipt.Receipt.SigningBytes)
	// with this replica's key: every accepted or late vote's answer, and
	// a retry's of a vote ledgered here, carries one. Nil: no receipts.
	SignReceipt func(msg []byte) []byte
}

// Pipeline is the vote path. It is safe for concurrent use.
type Pipeline struct {
	cfg         Config
	inflight    sync.RWMutex // held shared from ledger append to count; a checkpoint takes it whole
	stamping    sync.RWMutex // held shared from a request's checks to its append; a fence takes it whole (fence.go)
	fenced      sync.Map     // poll id → int64: the time it was fenced at here, 0: never (fence.go)
	ipLim       *limiter
	voteLim     *limiter
	sessions    *sessionState // nil: tokens off
	tracker     *tracker
	pollLims    sync.Map // poll id → *pollLimiters, for polls with their own limits
	datacenters ranges
	m           *metrics

	answersMu sync.Mutex
	answering map[answerKey]struct{} // quiz answers being ledgered (reserveAnswer)
}

// New returns a pipeline.
func New(cfg Config) (*Pipeline, error) {
	if cfg.Ledger == nil || cfg.State == nil || cfg.Clock == nil {
		return nil, errors.New("ingest: Ledger, State and Clock are required")
	}
	d := DefaultLimits()
	if cfg.Limits.MaxBody <= 0 {
		cfg.Limits.MaxBody = d.MaxBody
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("ingest: cannot register metrics: %w", err)
	}
	return &Pipeline{
		cfg:         cfg,
		ipLim:       newLimiter(cfg.Limits.IPRate, cfg.Limits.IPBurst),
		voteLim:     newLimiter(cfg.Limits.VoterRate, cfg.Limits.VoterBurst),
		m:           m,
		tracker:     newTracker(),
		datacenters: ranges(cfg.Datacenters),
		answering:   map[answerKey]struct{}{},
		sessions: func() *sessionState {
			if cfg.Sessions.Signer == nil {
				return nil
			}
			return newSessionState(cfg.Sessions, cfg.State.Budget)
		}(),
	}, nil
}

// Submit runs votes for one poll through the pipeline on behalf of the
// client at ip. It returns one Result per vote, in order, or an *api.Error
// for the whole request, in which case nothing was ledgered or counted.
func (p *Pipeline) Submit(pollID string, votes []Vote, ip string) ([]Result, error) {
	return p.SubmitFrom(pollID, votes, Client{Sender: api.HTTPSender(ip, "", "", 0), TokenAge: -1})
}

// Client is a vote's sender once its voter token, if any, is checked: the
// trust score reads it.
type Client struct {
	api.Sender
	TokenAge  time.Duration // age of the voter token; < 0: none
	TokenSlot int           // the token's slot in its address group (budget.go); 0: none
}

// SubmitFrom is Submit with everything known about the client.
func (p *Pipeline) SubmitFrom(pollID string, votes []Vote, c Client) ([]Result, error) {
	results, err := p.submit(pollID, votes, c)
	if err != nil {
		return nil, err
	}
	return results, nil
}

// pollRead is a request's poll definition, read from state once for the
// whole request (its token check and its checks).
type pollRead struct {
	def   poll.Definition
	found bool
}

func readPoll(st *state.State, pollID string) pollRead {
	def, ok := st.Defs.Poll(pollID)
	return pollRead{def, ok}
}

// observe counts a request's votes by their answer and its latency.
func (p *Pipeline) observe(start time.Time, votes int, results []Result, err error) {
	p.m.latency.Observe(time.Since(start).Seconds())
	if err != nil {
		reason := api.CodeInternal
		var e *api.Error
		if errors.As(err, &e) {
			reason = e.Code
		}
		p.m.votes.WithLabelValues(StatusRejected, reason).Add(float64(votes))
		return
	}
	for _, r := range results {
		if r.Status == StatusRejected {
			continue // counted with its reason where it was refused (idem_conflict)
		}
		p.m.votes.WithLabelValues(r.Status, "").Inc()
	}
}

// submit answers a request's votes, counted in the metrics (observe).
func (p *Pipeline) submit(pollID string, votes []Vote, c Client) (results []Result, err error) {
	defer func(start time.Time) { p.observe(start, len(votes), results, err) }(time.Now())
	defer func() { signReceipts(p.cfg.SignReceipt, results) }() // after the locks below are let go
	p.stamping.RLock()
	defer p.stamping.RUnlock()
	// The poll as defined now, under the lock, not as the token check
	// read it: a close written since must decide this vote's window
	// (Settle waits for the requests that read it before).
	pr, err := p.prepare(pollID, readPoll(p.cfg.State, pollID), votes, c)
	if err != nil {
		return nil, err
	}
	defer pr.release()
	if len(pr.recs) == 0 {
		return pr.results, nil
	}
	p.inflight.RLock()
	defer p.inflight.RUnlock()
	appended, err := p.cfg.Ledger.Append(pr.recs...)
	if errors.Is(err, ledger.ErrNotCopied) {
		// Ledgered here, so counted, but not acknowledged: two copies
		// were promised.
		if _, err := p.countAppended(pollID, pr.results, pr.fresh, pr.look.Votes, pr.recs, appended); err != nil {
			return nil, err
		}
		return nil, notCopiedErr(err)
	}
	if err != nil {
		pr.tokens.giveBack()
		return nil, ledgerErr(err)
	}
	return p.countAppended(pollID, pr.results, pr.fresh, pr.look.Votes, pr.recs, appended)
}

// prepared is one request's votes between their checks and their ledger
// append: the answers known already (retries), the records of the new
// votes, and what to undo or let go once they are appended or not.
type prepared struct {
	results []Result
	look    state.RequestLook // the votes' state, read once (State.LookVotes)
	fresh   []int
	recs    []ledger.Record // one per fresh vote; empty: every vote answered
	tokens  tokens          // the rate limits' reservations, given back if the append failed
	release func()          // ends a quiz answer's reservation, after the count
}

func nothing() {}

// prepare runs a request's checks, answers its retries, takes its rate
// limits' tokens and stamps the records of its new votes. An error refuses
// the whole request and leaves nothing taken.
func (p *Pipeline) prepare(pollID string, read pollRead, votes []Vote, c Client) (*prepared, error) {
	def, err := p.checkRequest(pollID, read, votes)
	if err != nil {
		return nil, err
	}
	look, results, fresh, err := p.answerRetries(pollID, votes)
	if err != nil {
		return nil, err
	}
	pr := &prepared{results: results, look: look, fresh: fresh, release: nothing}
	if len(fresh) == 0 {
		return pr, nil
	}
	if err := p.takesNewVotes(pollID, &def, look); err != nil {
		return nil, err
	}
	if def.Quiz != nil {
		// One answer per participant: the first stands (docs/quiz.md).
		// Known here once its ballot arrived, from any region; two at
		// this node at once are kept apart by the reservation.
		if len(votes) > 1 {
			return nil, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "a quiz answer is one vote, not a batch")
		}
		if pr.release, err = p.reserveAnswer(pollID, look.Votes[0].Voter); err != nil {
			return nil, err
		}
	}
	now := p.cfg.Now()
	addr := AddressKey(c.IP, p.ipv6Prefix()) // the client as the per-address limits count it
	if err = p.reserveRates(&pr.tokens, &def, addr, votes, fresh, now); err != nil {
		pr.release()
		return nil, err
	}
	if pr.recs, err = p.stamp(&def, votes, fresh, look.Votes, c, addr, now); err != nil {
		pr.tokens.giveBack()
		pr.release()
		return nil, err
	}
	return pr, nil
}

// ledgerErr is the answer to a request whose records the ledger could not
// take.
func ledgerErr(err error) error {
	return api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "cannot ledger the vote: %v", err)
}

// notCopiedErr is the answer to a request whose records the ledger took
// but could not copy to a second machine (ledger.ErrNotCopied): they
// count, but were not acknowledged. Its retry is answered once the copy
// is made (retry, ledger.Ledger.Copied).
func notCopiedErr(err error) error {
	return &api.Error{Status: http.StatusGatewayTimeout, Code: api.CodeOutcomeUnknown, RetryAfter: time.Second,
		Message: fmt.Sprintf("the vote is ledgered at this node but its copy on a second machine is not confirmed (%v): send the same request again, with the same key, to learn its outcome", err)}
}

// countAppended answers each new vote from its ledger append, durable
// now, and counts those the ledger had not held already.
func (p *Pipeline) countAppended(pollID string, results []Result, fresh []int, looks []state.VoteLook, recs []ledger.Record, appended []ledger.Appended) ([]Result, error) {
	for j, i := range fresh {
		a, r := appended[j], &recs[j]
		results[i].VoteID = a.ID.String()
		if a.Duplicate {
			results[i].Status = StatusDuplicate
			// Read again: the key's ballot arrived while the vote was stamped.
			now := p.cfg.State.Look(pollID, looks[i].Voter, looks[i].Idem)
			if now.Conflict() { // another voter's vote took the key meanwhile
				results[i].Status, results[i].Error, results[i].VoteID = StatusRejected, api.CodeIdemConflict, ""
				p.m.votes.WithLabelValues(StatusRejected, api.CodeIdemConflict).Inc()
			} else if b := now.Retry; now.IsRetry {
				id := ledger.VoteID{Replica: b.Replica, Seq: b.Seq}
				results[i].VoteID, results[i].Stamp = id.String(), api.FormatStamp(b.Wall, b.Logical)
				results[i].Receipt = retryReceipt(&p.cfg, pollID, id)
			}
			continue
		}
		results[i].Status = StatusAccepted
		results[i].Stamp = api.FormatStamp(r.Wall, r.Logical)
		results[i].Receipt = unsigned(p.cfg.SignReceipt, r) // signed once the locks are let go
		if r.Late {
			results[i].Status = StatusLate
		}
		if r.Answer != nil {
			results[i].ElapsedMs = &r.Answer.ElapsedMs
			keepName(p.cfg.State, pollID, r)
		}
		if err := p.count(r, looks[i].Voter, looks[i].Idem); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// checkRequest checks a request's votes against their poll before
// anything is counted: the poll exists (a parked quiz question does not),
// 1 to MaxBatch votes, each for one of its options (interned), and quiz
// names. It returns the poll's definition.
func (p *Pipeline) checkRequest(pollID string, read pollRead, votes []Vote) (poll.Definition, error) {
	def := read.def
	if !read.found || def.Withheld(p.cfg.Now().UnixMilli()) {
		return poll.Definition{}, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", pollID)
	}
	if len(votes) == 0 || len(votes) > MaxBatch {
		return poll.Definition{}, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "send 1-%d votes", MaxBatch)
	}
	for i := range votes {
		option, ok := def.OptionID(votes[i].Option)
		if !ok {
			return poll.Definition{}, api.Errorf(http.StatusUnprocessableEntity, api.CodeInvalidOption, "vote %d: poll %q has no option %q", i, pollID, votes[i].Option)
		}
		votes[i].Option = option // one shared string per option: the voter state keeps it
	}
	if err := p.checkNames(&def, votes); err != nil {
		return poll.Definition{}, err
	}
	return def, nil

}

// answerRetries reads the votes' state (State.LookVotes, the request's one
// read), answers, before they cost a token, the votes that are retries
// (duplicate, with the first vote's id) or reuse another voter's key
// (rejected), and returns which are new (fresh).
func (p *Pipeline) answerRetries(pollID string, votes []Vote) (look state.RequestLook, results []Result, fresh []int, err error) {
	keys := make([]state.VoteKey, len(votes))
	for i, v := range votes {
		keys[i] = state.VoteKey{Voter: v.Voter, Idem: v.Idem}
	}
	if look, err = p.cfg.State.LookVotes(pollID, keys); err != nil {
		return state.RequestLook{}, nil, nil, err
	}
	results = make([]Result, len(votes))
	for i, v := range votes {
		results[i].Idem = v.Idem
		if look.Votes[i].Conflict() {
			results[i].Status, results[i].Error = StatusRejected, api.CodeIdemConflict
			p.m.votes.WithLabelValues(StatusRejected, api.CodeIdemConflict).Inc()
			continue
		}
		dup, id, stamp, remote, err := p.retry(pollID, v.Idem, look.Votes[i])
		if err != nil {
			return state.RequestLook{}, nil, nil, err
		}
		if dup {
			results[i].Status, results[i].VoteID, results[i].Stamp = StatusDuplicate, id, stamp
			if !remote {
				b := look.Votes[i].Retry
				results[i].Receipt = retryReceipt(&p.cfg, pollID, ledger.VoteID{Replica: b.Replica, Seq: b.Seq})
			}
			if remote {
				p.m.remoteDuplicates.Inc()
			}
			continue
		}
		fresh = append(fresh, i)
	}
	return look, results, fresh, nil
}

// takesNewVotes refuses new votes while the node catches up after a start,
// and on a poll whose records a restore lost.
func (p *Pipeline) takesNewVotes(pollID string, def *poll.Definition, look state.RequestLook) error {
	if p.cfg.CatchingUp != nil && p.cfg.CatchingUp() {
		return &api.Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable, RetryAfter: time.Second,
			Message: "catching up with the other regions' votes after a start: send the same request again"}
	}
	if p.cfg.CopyReady != nil && !p.cfg.CopyReady() {
		return &api.Error{Status: http.StatusServiceUnavailable, Code: api.CodeNoCopy, RetryAfter: time.Second,
			Message: "no second full node is reachable to hold a copy of the vote, so it was not taken: send it again, or to another node"}
	}
	if held, acked := look.Held, look.Acknowledged; acked > held && def.WindowAt(p.cfg.Now().UnixMilli()) != poll.AfterGrace { // a closed poll answers poll_closed below
		// Restored from an older backup: a new record would take the seq,
		// and so the vote id, of a lost one. Other nodes take the vote.
		return &api.Error{Status: http.StatusServiceUnavailable, Code: api.CodeRecordsLost, RetryAfter: time.Second,
			Message: fmt.Sprintf("this node was restored holding %d of the %d records it acknowledged for poll %q and takes no new votes on it: vote at another node", held, acked, pollID)}
	}
	return nil
}

// retry tells whether a vote's key was taken before, and the vote id and
// stamp of the record that counts for it: the earliest under the key, at
// any replica, as certification keeps it. Every node answers a retry with
// that one id once the ballots have spread, a node that answered the key
// with its own record before included (docs/api.md, "Retries"). The voter
// state rules out new keys without a lookup (its ballots hold a keyed hash
// of every key ledgered anywhere in the cluster, with the voter's); a key
// it misses — another voter's, or one whose ballot has not arrived — still
// reaches the ledger, which answers it as a duplicate.
func (p *Pipeline) retry(pollID, idem string, l state.VoteLook) (dup bool, id, stamp string, remote bool, err error) {
	b := l.Retry
	if !l.IsRetry {
		return false, "", "", false, nil
	}
	if b.Replica == p.cfg.Ledger.Replica() {
		// This node's own record: the ledger's index confirms the key (two
		// keys sharing both hashes, odds 2^-128, go on to the ledger).
		_, found, err := p.cfg.Ledger.Lookup(pollID, idem)
		if err != nil {
			return false, "", "", false, api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "cannot check the idempotency key: %v", err)
		}
		if !found {
			return false, "", "", false, nil
		}
		// Its first answer may have been outcome_unknown (the copy
		// failed), or the node restarted since: copied now, or the retry
		// is answered 504 again — it counts, so it is never taken as new
		// (no rate, quiz or window check, no "not taken" refusal).
		if err := p.cfg.Ledger.EnsureCopied(pollID, ledger.VoteID{Replica: b.Replica, Seq: b.Seq}); err != nil {
			return false, "", "", false, notCopiedErr(err)
		}
	}
	id = ledger.VoteID{Replica: b.Replica, Seq: b.Seq}.String()
	return true, id, api.FormatStamp(b.Wall, b.Logical), b.Replica != p.cfg.Ledger.Replica(), nil
}

// count applies one ledgered record to memory: the ack for retries, this
// replica's record count, and its ballot — which moves the option
// counters when it becomes the voter's counted vote (see crdt.Ballots).
// Replay uses it too. voter and idem are the record's hashes (State.Hash).
func (p *Pipeline) count(r *ledger.Record, voter, idem uint64) error {
	if err := p.cfg.State.AddRecords(r.Poll, 1); err != nil {
		return err
	}
	return p.cfg.State.Vote(r.Poll, BallotOf(r, voter, idem, p.cfg.TrustFloor))
}

// BallotOf is a ledgered record's ballot, voter and idem its hashes
// (State.Hash): what this replica applies for its own records, and what
// a buddy applies for the copies it takes (package buddy), so that a
// retry failing over to it finds the key. Eligible follows
// certification: counted at ingest, not late, at or above trustFloor.
func BallotOf(r *ledger.Record, voter, idem uint64, trustFloor float64) crdt.Ballot {
	return crdt.Ballot{Replica: r.Replica, Seq: r.Seq, Wall: r.Wall, Logical: r.Logical,
		Voter: voter, Idem: idem, Option: r.Option,
		Eligible: r.Counted && !r.Late && r.Trust >= trustFloor}
}
