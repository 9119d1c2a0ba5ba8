package ledger

import (
	"fmt"
	"hash/maphash"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Merge is the exact merge of one poll built up record by record while the
// poll runs: the duplicate rule (the earliest record of an idempotency key
// stands) and each voter's standing records are kept as records arrive, so
// Result at close is one pass over the voters instead of maps over every
// record. For the same records Result gives what ReconcileWith gives,
// digest included, whatever order the replicas' chains were added in.
//
// Add takes each replica's chain in seq order, each record once, and
// checks that it links to the one before; the records must not change
// after they are added (Merge keeps pointers to them). Merge is safe for
// concurrent use.
type Merge struct {
	mu      sync.Mutex
	poll    string
	err     error            // the first Add that failed: the merge is unusable
	chains  map[string]Chain // replica → records added and the head
	seed    maphash.Seed
	shards  [mergeShards]mergeShard // by key hash: Result reads them in parallel
	records uint64
	idems   uint64                   // records that stand
	disp    map[string][]Disposition // replica → by seq - 1: duplicates as they are found, the rest at each Result
}

// mergeShards splits a merge's maps so that Result's pass over the voters
// runs on every core.
const mergeShards = 16

type mergeShard struct {
	idem   map[string]*Record   // idempotency key → the record that stands
	voters map[string]voterRecs // voter → its standing records
}

// voterRecs is one voter's standing records: most voters have one, kept
// without a slice.
type voterRecs struct {
	first *Record
	more  []*Record
}

// NewMerge starts an empty merge of one poll's records.
func NewMerge(poll string) *Merge {
	m := &Merge{poll: poll, chains: map[string]Chain{}, seed: maphash.MakeSeed(), disp: map[string][]Disposition{}}
	for i := range m.shards {
		m.shards[i] = mergeShard{idem: map[string]*Record{}, voters: map[string]voterRecs{}}
	}
	return m
}

func (m *Merge) shard(key string) *mergeShard {
	return &m.shards[maphash.String(m.seed, key)%mergeShards]
}

// Add merges the next record of its replica's chain. A record of another
// poll, or one that does not continue its replica's chain (a seq skipped
// or repeated, a different prev hash), is an error, and every later Add
// and Result returns it.
func (m *Merge) Add(r *Record) error {
	h := r.KeepHash()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	c := m.chains[r.Replica]
	switch {
	case r.Poll != m.poll:
		m.err = fmt.Errorf("%w: records of polls %q and %q in one merge", ErrInvalid, m.poll, r.Poll)
	case r.Seq != c.Records+1 || r.Prev != c.Head:
		m.err = fmt.Errorf("%w: %s/%s seq %d does not follow seq %d", ErrChain, r.Poll, r.Replica, r.Seq, c.Records)
	}
	if m.err != nil {
		return m.err
	}
	m.chains[r.Replica] = Chain{Poll: r.Poll, Replica: r.Replica, Records: r.Seq, Head: h}
	m.records++
	m.disp[r.Replica] = append(m.disp[r.Replica], 0)
	idem := m.shard(r.Idem).idem
	s, seen := idem[r.Idem]
	switch {
	case !seen:
		m.idems++
	case s.After(r):
		m.unstand(s) // r is earlier: it stands, s is now the duplicate
		m.disp[s.Replica][s.Seq-1] = DispDuplicate
	default:
		m.disp[r.Replica][r.Seq-1] = DispDuplicate
		return nil
	}
	idem[r.Idem] = r
	voters := m.shard(r.Voter).voters
	v := voters[r.Voter]
	if v.first == nil {
		v.first = r
	} else {
		v.more = append(v.more, r)
	}
	voters[r.Voter] = v
	return nil
}

// unstand takes s out of its voter's standing records.
func (m *Merge) unstand(s *Record) {
	voters := m.shard(s.Voter).voters
	v := voters[s.Voter]
	if v.first == s {
		if len(v.more) == 0 {
			delete(voters, s.Voter)
			return
		}
		v.first, v.more = v.more[0], v.more[1:]
	} else {
		v.more = slices.DeleteFunc(v.more, func(o *Record) bool { return o == s })
	}
	voters[s.Voter] = v
}

// Records returns how many records of replica's chain are merged, and the
// records merged in all.
func (m *Merge) Records(replica string) (chain, all uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.chains[replica].Records, m.records
}

// Chains returns every replica's chain as far as it is merged, by replica.
func (m *Merge) Chains() []Chain {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.SortedFunc(maps.Values(m.chains), func(a, b Chain) int { return strings.Compare(a.Replica, b.Replica) })
}

// Result applies the rules to the records added so far: cfg's close, trust
// floor, shadow function and FirstWins, as ReconcileWith does. cfg.Poll,
// when set, must be the merge's poll.
func (m *Merge) Result(cfg ReconcileConfig) (*Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return nil, m.err
	}
	if cfg.Poll != "" && cfg.Poll != m.poll {
		return nil, fmt.Errorf("%w: a merge of poll %q asked for poll %q", ErrInvalid, m.poll, cfg.Poll)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	res := &Result{Poll: m.poll, Totals: map[string]uint64{}, ClosesAt: cfg.ClosesAt, CloseRule: cfg.CloseRule, FirstWins: cfg.FirstWins,
		Records: m.records, Duplicates: m.records - m.idems}
	res.Replicas = append([]Chain{}, slices.SortedFunc(maps.Values(m.chains), func(a, b Chain) int { return strings.Compare(a.Replica, b.Replica) })...)
	parts := make([]Result, mergeShards)
	work := make(chan int, mergeShards)
	for i := range mergeShards {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), mergeShards) {
		wg.Go(func() {
			for i := range work {
				parts[i] = m.shards[i].count(cfg, m.disp)
			}
		})
	}
	wg.Wait()
	res.disp = make(map[string][]Disposition, len(m.disp))
	for rep, d := range m.disp {
		res.disp[rep] = slices.Clone(d)
	}
	for _, p := range parts {
		res.Voters += p.Voters
		res.Late += p.Late
		res.Shadowed += p.Shadowed
		res.Total += p.Total
		res.AfterClose += p.AfterClose
		for o, n := range p.Totals {
			res.Totals[o] += n
		}
		res.Answers = append(res.Answers, p.Answers...)
	}
	slices.SortFunc(res.Answers, func(a, b ScoredAnswer) int { return strings.Compare(a.Voter, b.Voter) })
	res.Superseded = res.Records - res.Duplicates - res.Late - res.Shadowed - res.Total
	res.Digest = res.digest()
	return res, nil
}

// count applies the per-voter rules to one shard's voters: the late and
// shadowed records, and each voter's counted one by option. It marks
// each standing record's disposition in disp (a shard's records are its
// own: no other shard writes their bytes).
func (sh *mergeShard) count(cfg ReconcileConfig, disp map[string][]Disposition) Result {
	res := Result{Totals: map[string]uint64{}, Voters: uint64(len(sh.voters))}
	mark := func(r *Record, d Disposition) { disp[r.Replica][r.Seq-1] = d }
	for _, v := range sh.voters {
		var counted *Record
		consider := func(r *Record) {
			switch cfg.place(r) {
			case placedLate:
				res.Late++
				mark(r, DispLate)
			case placedShadowed:
				res.Shadowed++
				mark(r, DispShadowed)
			default:
				mark(r, DispSuperseded) // until it is found to count
				if cfg.prefer(r, counted) {
					counted = r
				}
			}
		}
		consider(v.first)
		for _, r := range v.more {
			consider(r)
		}
		if counted == nil {
			continue
		}
		mark(counted, DispCounted)
		res.Totals[counted.Option]++
		res.Total++
		if cfg.pastClose(counted) {
			res.AfterClose++
		}
		if a := counted.Answer; a != nil {
			res.Answers = append(res.Answers, ScoredAnswer{Voter: counted.Voter, Option: counted.Option, ElapsedMs: a.ElapsedMs, Score: a.Score, Name: a.Name})
		}
	}
	return res
}
