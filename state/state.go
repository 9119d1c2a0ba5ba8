package state

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"tally/crdt"
	"tally/poll"
)

// ErrStore is returned when a definition cannot be persisted or loaded.
var ErrStore = errors.New("state: store")

// ErrTooManyPolls is returned by PutPoll for a new poll when the state
// already holds Config.MaxPolls (from the API or from gossip alike).
var ErrTooManyPolls = errors.New("state: too many polls")

// ErrTooManyReplicas is returned by Merge when a tally would take a poll
// past MaxReplicas distinct replicas (a peer inventing replicas).
var ErrTooManyReplicas = errors.New("state: too many replicas in a poll")

// MaxReplicas bounds the distinct replicas of one poll: every node that
// ever took votes for it, nodes replaced after losing their disks
// included.
const MaxReplicas = 256

// DefaultMaxPolls is how many polls a node holds at most by default.
const DefaultMaxPolls = 1000

// Store persists small values; the ledger implements it.
type Store interface {
	PutMeta(name string, value []byte) error
	MetaWithPrefix(prefix string) iter.Seq2[string, []byte]
}

var pollPrefix = poll.StoreKey("") // definitions in the Store

// Config configures a State.
type Config struct {
	// Now is this node's clock; nil: time.Now. It stamps when a poll's
	// definition first reached the node (OpenedHere).
	Now func() time.Time
	// Replica is this node's replica id: the owner of the striped cells.
	Replica string
	// Store persists poll definitions; nil keeps them in memory only.
	Store Store
	// Stripes per option; default 4 × GOMAXPROCS.
	Stripes int
	// MaxPolls bounds the polls held (open, closed and kept for retention);
	// default DefaultMaxPolls.
	MaxPolls int
	// HashKey keys the 64-bit hashes of voter ids and idempotency keys in
	// ballots (see Hash); every node of a cluster must use the same one.
	// Empty: a fixed key (a single node, or tests).
	HashKey []byte
	// Logger receives the state's warnings; nil: slog.Default().
	Logger *slog.Logger
}

// State is the node's replicated state: the definitions store (embedded:
// definitions, certificates, replicas' keys and tombstones) and, per
// poll, the counters and ballots. It is safe for concurrent use.
type State struct {
	// Defs are the poll definitions, certificates and keys; Budget the
	// voter-token budgets; Replicas when each replica was last heard
	// from; Audience the viewers each replica serves. Each is set by New
	// and never replaced.
	Defs     *Definitions
	Budget   *Budgets
	Replicas *Replicas
	Audience *Audience
	Quizzes  Quizzes // an api.QuizSource
	Names    Names   // the display names each quiz's participants took (names.go)

	replica string
	store   Store // the voter-token budgets' (budget.go)
	stripes int

	pmu   sync.RWMutex          // guards polls
	polls map[string]*pollState // a poll's counts exist before its definition is visible, and go after it

	hashKey []byte
	now     func() time.Time
	log     *slog.Logger
	saved   savedTallies // what SaveTallies last wrote (known.go)
}

// pollState is one poll's counts.
type pollState struct {
	local *cells

	mu    sync.Mutex // guards tally
	tally *crdt.Tally

	bmu     sync.Mutex      // guards ballots and outbox
	ballots *crdt.Ballots   // every replica's ballots: the cluster-wide voter state
	outbox  []crdt.Ballot   // this replica's ballots not yet taken for publishing
	echo    map[string]bool // gone replicas whose entries this one sends on (steward.go); guarded by mu
	held    map[string]bool // replicas whose record count this one states, holding their copies (steward.go); guarded by mu

	vmu     sync.Mutex              // guards viewers
	viewers map[string]viewerCount  // replica → the viewers it serves (see viewers.go)
	joiners map[string]joinerReport // replica → the newest who joined at it, for a quiz's first question (viewers.go)

	seenMs int64 // when this node first held the definition (its clock, Unix ms)

	smu   sync.Mutex       // guards shown
	shown map[uint64]int64 // a quiz question's participants: when first shown it here (shown.go)

	nmu   sync.Mutex // guards names
	names nameBook   // a quiz's first question: the display names its participants took (names.go)
}

// New returns a state holding the definitions found in cfg.Store.
func New(cfg Config) (*State, error) {
	if cfg.Stripes <= 0 {
		cfg.Stripes = 4 * runtime.GOMAXPROCS(0)
	}
	if cfg.MaxPolls <= 0 {
		cfg.MaxPolls = DefaultMaxPolls
	}
	s := &State{replica: cfg.Replica, store: cfg.Store, stripes: cfg.Stripes, polls: make(map[string]*pollState),
		hashKey: cfg.HashKey, now: cfg.Now, log: cmp.Or(cfg.Logger, slog.Default())}
	if s.now == nil {
		s.now = time.Now
	}
	if len(s.hashKey) == 0 {
		s.hashKey = []byte("tally ballot hash v1")
	}
	s.Budget = &Budgets{replica: cfg.Replica}
	s.Replicas = &Replicas{}
	s.Audience = &Audience{replica: cfg.Replica, poll: s.poll}
	s.Quizzes = Quizzes{s}
	s.Names = Names{s}
	s.Defs = &Definitions{store: cfg.Store, maxPolls: cfg.MaxPolls, onDefine: s.define, onForget: s.drop}
	if s.store == nil {
		return s, nil
	}
	s.Budget.load(s.store, s.now().UnixMilli())
	if err := s.Defs.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// Replica returns this node's replica id.
func (s *State) Replica() string { return s.replica }

// define readies a poll's counts for a definition about to be set: new
// cells, tally and ballots for a new poll. The ballots take no close:
// the live tally counts what each ballot's node decided (a vote its node
// took before it heard of the close counts, as the certificate counts it:
// ledger.CloseByNode), never by comparing stamps with closes_at.
func (s *State) define(reg crdt.Register[poll.Definition]) {
	options := make([]string, len(reg.Value.Options))
	for i, o := range reg.Value.Options {
		options[i] = o.ID
	}
	s.pmu.Lock()
	ps, ok := s.polls[reg.Value.ID]
	if !ok {
		ballots := crdt.NewBallots(0)
		if reg.Value.Quiz != nil {
			ballots = crdt.NewFirstBallots(0) // a participant's first answer counts
		}
		s.polls[reg.Value.ID] = &pollState{local: newCells(options, s.stripes), tally: crdt.NewTally(), ballots: ballots, seenMs: s.now().UnixMilli()}
		s.pmu.Unlock()
		return
	}
	s.pmu.Unlock()
	if !sameOptions(ps.local, options) {
		// Options are fixed at creation; a definition changing them is
		// kept, but counting continues in the cells that exist.
		s.log.Warn("state: poll options changed; keeping the original cells", "poll", reg.Value.ID)
	}
}

// drop lets a forgotten poll's counts go.
func (s *State) drop(id string) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	delete(s.polls, id)
}

func sameOptions(c *cells, options []string) bool {
	if len(c.options) != len(options) {
		return false
	}
	for _, o := range options {
		if _, ok := c.options[o]; !ok {
			return false
		}
	}
	return true
}

func (s *State) poll(id string) (*pollState, error) {
	s.pmu.RLock()
	ps, ok := s.polls[id]
	s.pmu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", poll.ErrNotFound, id)
	}
	return ps, nil
}

// Count changes this replica's count of option in pollID by delta: +1 for
// a counted vote, -1 when a voter's vote moves away from option.
func (s *State) Count(pollID, option string, delta int64) error {
	ps, err := s.poll(pollID)
	if err != nil {
		return err
	}
	if !ps.local.add(option, delta) {
		return fmt.Errorf("state: poll %q has no option %q", pollID, option)
	}
	return nil
}

// AddRecords adds n to this replica's ledger record count for the poll.
func (s *State) AddRecords(pollID string, n uint64) error {
	ps, err := s.poll(pollID)
	if err != nil {
		return err
	}
	ps.local.addRecords(n)
	return nil
}

// Tally returns a copy of the poll's tally: every replica's entries, this
// replica's folded in from its cells.
func (s *State) Tally(pollID string) (*crdt.Tally, error) {
	ps, err := s.poll(pollID)
	if err != nil {
		return nil, err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	s.fold(ps)
	return ps.tally.Clone(), nil
}

// Totals returns the live count of every option of the poll (zero for
// options without votes) and their sum.
func (s *State) Totals(pollID string) (map[string]int64, int64, error) {
	def, ok := s.Defs.Poll(pollID)
	t, err := s.Tally(pollID)
	if err != nil || !ok {
		return nil, 0, err
	}
	totals := make(map[string]int64, len(def.Options))
	var sum int64
	for _, o := range def.Options {
		totals[o.ID] = t.Value(o.ID)
		sum += totals[o.ID]
	}
	return totals, sum, nil
}

// Merge folds entries another replica reported into the poll's tally and
// reports whether anything changed.
func (s *State) Merge(pollID string, delta *crdt.Tally) (bool, error) {
	ps, err := s.poll(pollID)
	if err != nil {
		return false, err
	}
	def, _ := s.Defs.Poll(pollID)
	options := make([]string, len(def.Options))
	for i, o := range def.Options {
		options[i] = o.ID
	}
	delta = delta.Only(options) // counts for options the poll does not have are not kept
	ps.mu.Lock()
	defer ps.mu.Unlock()
	held := ps.tally.Replicas() // sorted
	n := len(held)
	for _, r := range delta.Replicas() {
		if _, found := slices.BinarySearch(held, r); !found {
			n++
		}
	}
	if n > MaxReplicas {
		return false, fmt.Errorf("%w: poll %q would have %d replicas", ErrTooManyReplicas, pollID, n)
	}
	changed := ps.tally.Merge(delta)
	if changed {
		s.lift(ps)
	}
	return changed, nil
}

// OwnRecords returns how many records of the poll this replica's ledger
// holds (as applied) and how many the cluster says it acknowledged. The
// second is larger only after a restore from an older backup: the records
// between were acknowledged and are lost with the original disk.
func (s *State) OwnRecords(pollID string) (held, acknowledged uint64, err error) {
	ps, err := s.poll(pollID)
	if err != nil {
		return 0, 0, err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	held = ps.local.recordCount()
	return held, max(held, ps.tally.Records(s.replica)), nil
}

// lift raises this replica's cells when the cluster reports own entries
// above them. That happens after a restart: the ledger replay applies
// votes in sequence order, and a voter's changes of mind applied in
// another order than when they were live make fewer (or more) increments
// and decrements for the same count. The cluster still holds the old,
// higher P and N as maxima, so new votes would hide under them. The cells
// are raised to P' = max(P, Pr, Nr+v), N' = P'-v, with v the local count:
// both at or above what the cluster holds, the count unchanged. Callers
// hold ps.mu.
//
// A replica restored from a backup holds fewer records than the cluster
// says it acknowledged (its own record count as the others hold it is
// higher than its ledger's): its local count comes from a shorter history,
// and keeping it would pull the number on air down everywhere. Then each
// cell is raised to the cluster's entry instead, P' = max(P, Pr) and N' =
// max(N, Nr): the higher entry stands, and the count on air is the one
// before the loss until certification settles what the ledgers hold.
func (s *State) lift(ps *pollState) {
	lost := ps.tally.Records(s.replica) > ps.local.recordCount()
	for option, col := range ps.local.options {
		c := ps.tally.Counter(option)
		rp, rn := c.P.Get(s.replica), c.N.Get(s.replica)
		p, n := ps.local.sum(col)
		if rp <= p && rn <= n {
			continue
		}
		if lost {
			ps.local.add(option, int64(max(p, rp)-p))
			ps.local.add(option, -int64(max(n, rn)-n))
			continue
		}
		v := int64(p) - int64(n)
		np := max(int64(p), int64(rp), int64(rn)+v)
		nn := np - v
		ps.local.add(option, np-int64(p))
		ps.local.add(option, -(nn - int64(n)))
	}
}

// fold copies this replica's cells into the tally. Cells only grow, so the
// merge is monotone. Callers hold ps.mu.
func (s *State) fold(ps *pollState) {
	for option, col := range ps.local.options {
		p, n := ps.local.sum(col)
		ps.tally.MergeEntry(s.replica, option, p, n)
	}
	ps.tally.MergeRecords(s.replica, ps.local.recordCount())
}
