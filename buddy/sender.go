package buddy

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"tally/ledger"
)

// ErrNoBuddy is Copy's error while no other full node is there to hold
// the copy.
var ErrNoBuddy = errors.New("buddy: no other full node to hold a copy")

// ErrNoKey is Copy's error from a Sender given no signing key.
var ErrNoKey = errors.New("buddy: no signing key for the copies' heads")

// SenderConfig configures a Sender.
type SenderConfig struct {
	// Conn is the node's NATS connection, nil until it is connected
	// (the ledger opens before the mesh starts).
	Conn             func() *nats.Conn
	Cluster, Replica string // this node's replica: the records' and the sender's
	// Key is this replica's signing key (the one it announces and signs
	// certificates with): each request carries its signed head of every
	// chain of its records, so the buddy keeps, with the copy, the
	// replica's own word for it. Required: without it Copy fails.
	Key ed25519.PrivateKey
	// Buddies returns the replicas that may hold this node's copy now,
	// the buddy first (Rank over the live full nodes); empty while there
	// is none.
	Buddies func() []string
	// Scan reads this node's own ledger: what a buddy that is behind
	// lacks is sent from it.
	Scan func(poll, replica string, after uint64) iter.Seq2[ledger.Record, error]
	// Timeout bounds one request's answer; default 1 s. A buddy that
	// does not answer in time is passed over for the next.
	Timeout time.Duration
	// Degrade acknowledges with one copy while no buddy answers (each
	// such vote counted and logged) instead of failing the copy.
	Degrade  bool
	Seal     func([]byte) []byte
	Open     func([]byte) ([]byte, error)
	Metrics  *Metrics
	Logger   *slog.Logger
	Now      func() time.Time
	LogEvery time.Duration // how often a degraded copy is logged; default 10 s
	// RankEvery is how long Ready reuses a ranking of the buddies (it
	// runs for every request; ranking walks the member list, which moves
	// on memberlist's time, seconds); default 200 ms. Copy ranks afresh.
	RankEvery time.Duration
}

// Sender is a full node's side: its ledger's Copier.
type Sender struct {
	cfg         SenderConfig
	mu          sync.Mutex           // guards the fields below
	last        string               // the buddy the last copy went to: a change is logged
	lastLogged  time.Time            // when a degraded copy was last logged
	lastNoBuddy time.Time            // when the refusals for want of a buddy were last logged
	avoid       map[string]time.Time // buddies that failed a copy, tried last until then
	ranked      []string             // Buddies() as of rankedAt: read per request by Ready
	rankedAt    time.Time
}

// How a Sender moves past a buddy that fails: at most maxTries buddies
// a batch, and one that failed is tried after the others for avoidFor.
const (
	maxTries = 3
	avoidFor = 10 * time.Second
)

// NewSender returns the Copier of this node's ledger.
func NewSender(cfg SenderConfig) *Sender {
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LogEvery <= 0 {
		cfg.LogEvery = 10 * time.Second
	}
	if cfg.RankEvery <= 0 {
		cfg.RankEvery = 200 * time.Millisecond
	}
	return &Sender{cfg: cfg, avoid: map[string]time.Time{}}
}

// Ready reports whether a buddy is there to take copies (or, degraded,
// whether votes are acknowledged anyway): new votes are refused while
// it is not.
func (s *Sender) Ready() bool {
	if s.cfg.Degrade || len(s.buddies(false)) > 0 {
		return true
	}
	s.logNoBuddy()
	return false
}

// logNoBuddy says, at most every LogEvery, that new votes are refused for
// want of a buddy and what the operator can do: a node alone with a
// gossip key looks healthy otherwise.
func (s *Sender) logNoBuddy() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.cfg.Now(); now.Sub(s.lastNoBuddy) >= s.cfg.LogEvery || now.Before(s.lastNoBuddy) {
		s.lastNoBuddy = now
		s.cfg.Logger.Warn("buddy: no other full node is reachable to hold copies: new votes are refused (503 no_copy); " +
			"start or --join another full node, or run with --ack-copies 1 or --ack-copies-degrade")
	}
}

// buddies is cfg.Buddies, ranked again once RankEvery has passed, or
// at once with fresh.
func (s *Sender) buddies(fresh bool) []string {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if fresh || s.rankedAt.IsZero() || now.Sub(s.rankedAt) >= s.cfg.RankEvery || now.Before(s.rankedAt) {
		s.ranked, s.rankedAt = s.cfg.Buddies(), now
	}
	return s.ranked
}

// Copy sends recs (and whatever the buddy lacks before them) to the
// buddy and returns once it has fsynced them: ledger.Copier.
func (s *Sender) Copy(recs []ledger.Record) error {
	start := s.cfg.Now()
	err := ErrNoBuddy
	for _, b := range s.candidates() {
		if err = s.copyTo(b, recs); err == nil {
			s.noteBuddy(b)
			break
		}
		s.failedAt(b, err)
	}
	if err == nil {
		s.cfg.Metrics.sent(len(recs), s.cfg.Now().Sub(start))
		return nil
	}
	s.cfg.Metrics.failed()
	if s.cfg.Degrade {
		s.cfg.Metrics.acknowledgedOnce(len(recs))
		s.logDegraded(len(recs), err)
		return nil
	}
	return err
}

// candidates are the buddies a batch tries, in order: the ranked ones
// that have not failed lately, then those that have, at most maxTries.
func (s *Sender) candidates() []string {
	ranked := s.buddies(true)
	now := s.cfg.Now()
	s.mu.Lock()
	var fine, failed []string
	for _, b := range ranked {
		if until, ok := s.avoid[b]; ok && now.Before(until) {
			failed = append(failed, b)
		} else {
			delete(s.avoid, b)
			fine = append(fine, b)
		}
	}
	s.mu.Unlock()
	out := append(fine, failed...)
	return out[:min(len(out), maxTries)]
}

// failedAt sets a buddy that failed a copy aside for avoidFor.
func (s *Sender) failedAt(b string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.avoid[b]; !ok {
		s.cfg.Logger.Warn("buddy: a copy failed; the next buddy takes it", "buddy", b, "err", err)
	}
	s.avoid[b] = s.cfg.Now().Add(avoidFor)
}

// copyTo sends recs in parts; a buddy behind on a chain is first sent
// the records it lacks, then the part again.
func (s *Sender) copyTo(buddy string, recs []ledger.Record) error {
	for len(recs) > 0 {
		part := recs[:min(len(recs), MaxRecords)]
		rep, err := s.request(buddy, part)
		if err == nil && rep.Status == statusBehind {
			if err = s.catchUp(buddy, part, rep.Heads); err == nil {
				rep, err = s.request(buddy, part)
			}
		}
		if err != nil {
			return err
		}
		switch rep.Status {
		case statusOK:
		case statusBehind:
			return fmt.Errorf("buddy: %s is still behind after catching up", buddy)
		default:
			return fmt.Errorf("buddy: %s refused the copy: %s", buddy, rep.Reason)
		}
		recs = recs[len(part):]
	}
	return nil
}

// catchUp sends the buddy, chain by chain, this node's records after the
// buddy's head and before the part's first record of that chain.
func (s *Sender) catchUp(buddy string, part []ledger.Record, heads []head) error {
	first := map[string]uint64{}
	for _, r := range part {
		if _, ok := first[r.Poll]; !ok {
			first[r.Poll] = r.Seq
		}
	}
	for _, h := range heads {
		var chunk []ledger.Record
		for r, err := range s.cfg.Scan(h.Poll, s.cfg.Replica, h.Seq) {
			if err != nil {
				return err
			}
			if r.Seq >= first[h.Poll] {
				break
			}
			if chunk = append(chunk, r); len(chunk) == MaxRecords {
				if err := s.expectOK(buddy, chunk); err != nil {
					return err
				}
				chunk = chunk[:0]
			}
		}
		if err := s.expectOK(buddy, chunk); err != nil {
			return err
		}
	}
	return nil
}

func (s *Sender) expectOK(buddy string, recs []ledger.Record) error {
	if len(recs) == 0 {
		return nil
	}
	rep, err := s.request(buddy, recs)
	if err == nil && rep.Status != statusOK {
		err = fmt.Errorf("buddy: %s did not take the records it lacks (status %d %s)", buddy, rep.Status, rep.Reason)
	}
	if err == nil {
		s.cfg.Metrics.caughtUp(len(recs))
	}
	return err
}

// request sends one part, with this replica's signed head of each of its
// chains, and decodes the buddy's answer.
func (s *Sender) request(buddy string, recs []ledger.Record) (reply, error) {
	conn := s.cfg.Conn()
	if conn == nil {
		return reply{}, fmt.Errorf("buddy: to %s: %w", buddy, nats.ErrConnectionClosed)
	}
	if len(s.cfg.Key) != ed25519.PrivateKeySize {
		return reply{}, ErrNoKey
	}
	sealed := s.cfg.Seal(appendRequest(nil, request{From: s.cfg.Replica, Recs: recs, Heads: signHeads(s.cfg.Key, recs)}))
	s.cfg.Metrics.wrote(len(sealed))
	m, err := conn.Request(Subject(s.cfg.Cluster, buddy), sealed, s.cfg.Timeout)
	if err != nil {
		return reply{}, fmt.Errorf("buddy: to %s: %w", buddy, err)
	}
	body, err := s.cfg.Open(m.Data)
	if err != nil {
		return reply{}, fmt.Errorf("buddy: %s's reply does not open: %w", buddy, err)
	}
	return decodeReply(body)
}

// signHeads signs the head of each chain of recs (this replica's), at the
// chain's last record there: a head covers, by the records' hash links,
// every record of its chain up to it. One signature per chain a request.
func signHeads(key ed25519.PrivateKey, recs []ledger.Record) []ledger.SignedHead {
	last := map[string]int{}
	var polls []string
	for i := range recs {
		j, ok := last[recs[i].Poll]
		if !ok {
			polls = append(polls, recs[i].Poll)
		}
		if !ok || recs[i].Seq > recs[j].Seq {
			last[recs[i].Poll] = i
		}
	}
	heads := make([]ledger.SignedHead, 0, len(polls))
	for _, p := range polls {
		r := &recs[last[p]]
		heads = append(heads, ledger.SignHead(key, r.Poll, r.Replica, r.Seq, r.Hash()))
	}
	return heads
}

func (s *Sender) noteBuddy(buddy string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if buddy != s.last {
		s.cfg.Logger.Info("buddy: this node's votes are copied to its buddy", "buddy", buddy, "before", s.last)
		s.last = buddy
	}
}

func (s *Sender) logDegraded(n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.cfg.Now(); now.Sub(s.lastLogged) >= s.cfg.LogEvery {
		s.lastLogged = now
		s.cfg.Logger.Warn("buddy: votes acknowledged with one copy (--ack-copies-degrade): a loss of this machine loses them",
			"votes", n, "err", err, "counted_in", "tally_buddy_one_copy_votes_total")
	}
}
