package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"iter"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Result is the exact, certified outcome of one poll, computed from the
// records of every replica. Records = Duplicates + Late + Shadowed +
// Superseded + Total.
type Result struct {
	Poll       string            `json:"poll"`
	Totals     map[string]uint64 `json:"totals"`              // option → counted votes
	Total      uint64            `json:"total"`               // counted votes: one per voter at most
	Voters     uint64            `json:"voters"`              // distinct voters among the non-duplicate records
	Records    uint64            `json:"records"`             // distinct records read
	Duplicates uint64            `json:"duplicates"`          // retries: a (poll, idem) seen before by HLC order
	Late       uint64            `json:"late"`                // arrived after close, within grace
	Shadowed   uint64            `json:"shadowed"`            // not counted: below the trust floor
	Superseded uint64            `json:"superseded"`          // a voter's earlier votes, replaced by a later one
	Replicas   []Chain           `json:"replicas"`            // every replica's record count and chain head
	ClosesAt   int64             `json:"closes_at,omitempty"` // the close applied (ReconcileConfig.ClosesAt), Unix ms
	// CloseRule and AfterClose say how the close was applied: "node"
	// (ReconcileConfig.CloseRule) counts what each record's node decided,
	// and AfterClose is how many counted votes are stamped at or after
	// ClosesAt (their node took them before it heard of the close). Both
	// empty: the stamp rule of results certified before 2026-12.
	CloseRule  string `json:"close_rule,omitempty"`
	AfterClose uint64 `json:"after_close,omitempty"`
	// FirstWins and Answers are a quiz question's: each participant's
	// first answer counts (ReconcileConfig.FirstWins), and Answers lists
	// the counted ones that carry a score, by voter.
	FirstWins bool           `json:"first_wins,omitempty"`
	Answers   []ScoredAnswer `json:"answers,omitempty"`
	Digest    string         `json:"digest"` // SHA-256 over the canonical encoding of all of the above

	// disp is what the rules made of each record: replica → by seq - 1
	// (Disposition). Not in the JSON: the certificate's tree commits to
	// it (a record's leaf is its hash and its disposition).
	disp map[string][]Disposition
}

// Dispositions is what the rules made of each record of replica's chain,
// by seq - 1; the caller must not change it.
func (r *Result) Dispositions(replica string) []Disposition { return r.disp[replica] }

// Disposition is what the rules made of the record seq of replica's
// chain (seq from 1); 0 for a record the result does not hold.
func (r *Result) Disposition(replica string, seq uint64) Disposition {
	d := r.disp[replica]
	if seq == 0 || seq > uint64(len(d)) {
		return 0
	}
	return d[seq-1]
}

// ScoredAnswer is a quiz participant's counted answer to one question.
type ScoredAnswer struct {
	Voter     string `json:"voter"`
	Option    string `json:"option"`
	ElapsedMs int64  `json:"elapsed_ms"`
	Score     int64  `json:"score"`
	Name      string `json:"name,omitempty"` // the display name it was given under
}

// ReconcileConfig adjusts Reconcile.
type ReconcileConfig struct {
	// TrustFloor, when above zero, also shadows counted records whose
	// trust score is below it.
	TrustFloor float64
	// Shadow, when set, decides instead of the records' own Counted flag
	// and trust score which non-late records are shadowed (an auditor
	// re-running the filter on the recorded signals).
	Shadow func(*Record) bool
	// ClosesAt, when set, is the poll's final close (Unix ms). Under the
	// stamp rule (CloseRule ""), records stamped at or after it by their
	// HLC are late, whatever their node knew when it took them; under
	// CloseByNode it only counts the counted votes stamped past it
	// (Result.AfterClose).
	ClosesAt int64
	// CloseRule is how the close decides which records are late:
	// CloseByNode, or "" for the stamp rule above (results certified
	// before 2026-12, whose digests must still reproduce).
	CloseRule string
	// Poll, when set, is the poll reconciled: records of another poll are
	// an error, and it names the result (and so enters its digest) even
	// when there are no records, so two polls nobody voted in do not share
	// one digest.
	Poll string
	// FirstWins counts each voter's earliest record instead of the latest:
	// a quiz question, where the first answer stands (docs/quiz.md).
	FirstWins bool
}

// CloseByNode is the close rule that counts what each record's own node
// decided: a record is late only when its node ledgered it late (it knew
// of the close and the vote came within the grace). A vote answered
// "accepted" is so always counted (docs/certification.md, "The close").
const CloseByNode = "node"

// check refuses a config no certificate could have been made under.
func (cfg ReconcileConfig) check() error {
	if cfg.CloseRule != "" && cfg.CloseRule != CloseByNode {
		return fmt.Errorf("%w: unknown close rule %q (want %q or none)", ErrInvalid, cfg.CloseRule, CloseByNode)
	}
	return nil
}

// Reconcile is ReconcileWith the zero config.
func Reconcile(streams ...iter.Seq2[Record, error]) (*Result, error) {
	return ReconcileWith(ReconcileConfig{}, streams...)
}

// ReconcileWith merges the records of any number of streams into one poll's
// exact result. Rules:
//   - every replica's records must form a complete, valid hash chain;
//     a record given twice (identical bytes) counts once, two different
//     records at one (replica, seq) are ErrConflict;
//   - of records sharing a (poll, idem), the earliest by (HLC, replica, seq)
//     stands and the others are duplicates;
//   - late records and records not counted at ingest (or below the trust
//     floor) are kept in counts of their own, not in the totals;
//   - of each voter's remaining records the latest by (HLC, replica, seq)
//     is counted (the earliest with cfg.FirstWins); the others are
//     superseded.
//
// The result, digest included, depends only on the set of records, not on
// the order of streams or of records within them.
func ReconcileWith(cfg ReconcileConfig, streams ...iter.Seq2[Record, error]) (*Result, error) {
	parts := make([]collected, len(streams))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			parts[i] = collectStream(s)
		}()
	}
	wg.Wait()
	byReplica := make(map[string][]*Record)
	poll := cfg.Poll
	for _, p := range parts {
		if p.err != nil {
			return nil, p.err
		}
		if poll == "" {
			poll = p.poll
		} else if p.poll != "" && p.poll != poll {
			return nil, fmt.Errorf("%w: records of polls %q and %q in one reconcile", ErrInvalid, poll, p.poll)
		}
		for rep, recs := range p.byReplica {
			byReplica[rep] = append(byReplica[rep], recs...)
		}
	}
	return reconcile(cfg, poll, byReplica)
}

// ReconcileChains is ReconcileWith over records already in memory, each
// slice one replica's (a certifier's copies, read while the poll ran): the
// same rules, checks and result, without decoding or copying the records
// again. Neither the records nor the slices are changed.
func ReconcileChains(cfg ReconcileConfig, chains ...[]*Record) (*Result, error) {
	poll, byReplica, err := byReplicaOf(cfg.Poll, chains)
	if err != nil {
		return nil, err
	}
	return reconcile(cfg, poll, byReplica)
}

// byReplicaOf groups the chains' records by replica, each of poll (when
// set; else of the first record's poll), and returns the poll.
func byReplicaOf(poll string, chains [][]*Record) (string, map[string][]*Record, error) {
	byReplica := make(map[string][]*Record)
	for _, recs := range chains {
		for _, r := range recs {
			if poll == "" {
				poll = r.Poll
			} else if r.Poll != poll {
				return "", nil, fmt.Errorf("%w: records of polls %q and %q in one reconcile", ErrInvalid, poll, r.Poll)
			}
			byReplica[r.Replica] = append(byReplica[r.Replica], r)
		}
	}
	return poll, byReplica, nil
}

// reconcile applies the rules to one poll's records, by replica.
func reconcile(cfg ReconcileConfig, poll string, byReplica map[string][]*Record) (*Result, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	replicas := slices.Sorted(maps.Keys(byReplica))
	chains, err := checkChains(replicas, byReplica)
	if err != nil {
		return nil, err
	}
	res := &Result{Poll: poll, Totals: make(map[string]uint64), Replicas: chains, ClosesAt: cfg.ClosesAt, CloseRule: cfg.CloseRule, FirstWins: cfg.FirstWins}

	var all []*Record
	res.disp = make(map[string][]Disposition, len(replicas))
	for _, rep := range replicas {
		all = append(all, byReplica[rep]...)
		res.disp[rep] = make([]Disposition, len(byReplica[rep]))
	}
	resolve(res, all, cfg)
	res.Superseded = res.Records - res.Duplicates - res.Late - res.Shadowed - res.Total
	res.Digest = res.digest()
	return res, nil
}

// collected is one stream's records, read on a goroutine of its own:
// decoding an export is most of the cost of a merge.
type collected struct {
	poll      string
	byReplica map[string][]*Record
	err       error
}

func collectStream(s iter.Seq2[Record, error]) collected {
	c := collected{byReplica: make(map[string][]*Record)}
	var store arena
	for r, err := range s {
		if err != nil {
			c.err = err
			return c
		}
		if c.poll == "" {
			c.poll = r.Poll
		} else if r.Poll != c.poll {
			c.err = fmt.Errorf("%w: records of polls %q and %q in one reconcile", ErrInvalid, c.poll, r.Poll)
			return c
		}
		c.byReplica[r.Replica] = append(c.byReplica[r.Replica], store.add(r))
	}
	return c
}

// resolve applies the duplicate and last-vote-wins rules and fills in the
// counts. Both passes are sharded by key hash across the available cores:
// the map operations on a million keys are most of the work.
// It is long because the two passes share
// their shards' state; split, each half would need it passed whole.
func resolve(res *Result, all []*Record, cfg ReconcileConfig) {
	shards := runtime.GOMAXPROCS(0)
	seed := maphash.MakeSeed()
	shardOf := func(key string) int { return int(maphash.String(seed, key) % uint64(shards)) }
	parallel := func(f func(shard int)) {
		var wg sync.WaitGroup
		for s := range shards {
			wg.Go(func() { f(s) })
		}
		wg.Wait()
	}

	// Each record's two shards, hashed once: every pass below reads them
	// from a byte slice instead of hashing strings again.
	idemShard, voterShard := make([]uint16, len(all)), make([]uint16, len(all))
	parallel(func(s int) {
		for i := s; i < len(all); i += shards {
			idemShard[i], voterShard[i] = uint16(shardOf(all[i].Idem)), uint16(shardOf(all[i].Voter))
		}
	})

	// Pass 1: of the records sharing an idempotency key, the earliest stands.
	stands := make([]bool, len(all))
	standing := make([]int, shards)
	parallel(func(s int) {
		m := make(map[string]int, len(all)/shards+1)
		for i, r := range all {
			if idemShard[i] != uint16(s) {
				continue
			}
			if f, ok := m[r.Idem]; !ok || all[f].After(r) {
				m[r.Idem] = i
			}
		}
		for _, i := range m {
			stands[i] = true
		}
		standing[s] = len(m)
	})

	// Pass 2: per voter, the latest counted record wins. A voter with only
	// late or shadowed records maps to nil.
	out := make([]shardCounts, shards)
	parallel(func(s int) {
		latest := make(map[string]*Record, len(all)/shards/2+1)
		c := shardCounts{totals: make(map[string]uint64)}
		mark := func(r *Record, d Disposition) { res.disp[r.Replica][r.Seq-1] = d } // a record's shard writes its byte alone
		for i, r := range all {
			if voterShard[i] != uint16(s) {
				continue
			}
			if !stands[i] {
				mark(r, DispDuplicate)
				continue
			}
			l, seen := latest[r.Voter]
			switch cfg.place(r) {
			case placedLate:
				c.late++
				mark(r, DispLate)
			case placedShadowed:
				c.shadowed++
				mark(r, DispShadowed)
			default:
				mark(r, DispSuperseded) // until it is found to count
				if cfg.prefer(r, l) {
					latest[r.Voter] = r
					continue
				}
			}
			if !seen {
				latest[r.Voter] = nil
			}
		}
		for _, r := range latest {
			if r != nil {
				mark(r, DispCounted)
				c.totals[r.Option]++
				c.afterClose += b2u(cfg.pastClose(r))
				if a := r.Answer; a != nil {
					c.answers = append(c.answers, ScoredAnswer{Voter: r.Voter, Option: r.Option, ElapsedMs: a.ElapsedMs, Score: a.Score, Name: a.Name})
				}
			}
		}
		c.voters = uint64(len(latest))
		out[s] = c
	})

	res.Records = uint64(len(all))
	res.addShards(standing, out)
}

// shardCounts is one shard's part of resolve's counts.
type shardCounts struct {
	late, shadowed, voters, afterClose uint64
	totals                             map[string]uint64
	answers                            []ScoredAnswer
}

// addShards adds the shards' counts (and the records standing in each)
// to res, whose Records are set.
func (res *Result) addShards(standing []int, out []shardCounts) {
	res.Duplicates = res.Records
	for s := range out {
		res.Duplicates -= uint64(standing[s])
		res.Late += out[s].late
		res.Shadowed += out[s].shadowed
		res.Voters += out[s].voters
		res.AfterClose += out[s].afterClose
		for o, n := range out[s].totals {
			res.Totals[o] += n
			res.Total += n
		}
		res.Answers = append(res.Answers, out[s].answers...)
	}
	slices.SortFunc(res.Answers, func(a, b ScoredAnswer) int { return strings.Compare(a.Voter, b.Voter) })
}

// placement is where a standing record goes under the rules: late,
// shadowed, or a candidate for its voter's counted vote.
type placement int

const (
	placedCandidate placement = iota
	placedLate
	placedShadowed
)

// place applies the close and the trust filter to one standing record.
func (cfg ReconcileConfig) place(r *Record) placement {
	switch {
	case r.Late || cfg.CloseRule == "" && cfg.ClosesAt > 0 && r.Wall >= cfg.ClosesAt:
		return placedLate
	case cfg.Shadow != nil && cfg.Shadow(r), cfg.Shadow == nil && (!r.Counted || r.Trust < cfg.TrustFloor):
		return placedShadowed
	}
	return placedCandidate
}

// b2u is 1 for true.
func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// pastClose reports whether a counted record is stamped at or after the
// close, under CloseByNode: its node took it before it heard of the close.
func (cfg ReconcileConfig) pastClose(r *Record) bool {
	return cfg.CloseRule == CloseByNode && cfg.ClosesAt > 0 && r.Wall >= cfg.ClosesAt
}

// prefer reports whether candidate r is its voter's counted vote rather
// than c (nil: none yet): the latest by (HLC, replica, seq), or the
// earliest with FirstWins.
func (cfg ReconcileConfig) prefer(r, c *Record) bool {
	return c == nil || !cfg.FirstWins && r.After(c) || cfg.FirstWins && c.After(r)
}

// checkChains sorts each replica's records by seq, drops identical copies,
// and verifies the chain. Replicas are checked in parallel: hashing every
// record is most of the work.
func checkChains(replicas []string, byReplica map[string][]*Record) ([]Chain, error) {
	chains := make([]Chain, len(replicas))
	checked := make([][]*Record, len(replicas))
	errs := make([]error, len(replicas))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(replicas)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				checked[i], chains[i], errs[i] = checkChain(byReplica[replicas[i]])
			}
		}()
	}
	for i := range replicas {
		work <- i
	}
	close(work)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, err
		}
		byReplica[replicas[i]] = checked[i]
	}
	return chains, nil
}

func checkChain(recs []*Record) ([]*Record, Chain, error) {
	if !slices.IsSortedFunc(recs, bySeq) {
		slices.SortStableFunc(recs, bySeq)
	}
	out := recs[:0]
	hashes := make([]Hash, 0, len(recs))
	for _, r := range recs {
		h := r.Hash()
		if n := len(out); n > 0 && out[n-1].Seq == r.Seq {
			if hashes[n-1] != h {
				return nil, Chain{}, fmt.Errorf("%w: two different records at %s/%s seq %d", ErrConflict, r.Poll, r.Replica, r.Seq)
			}
			continue
		}
		want := Hash{}
		if n := len(out); n > 0 {
			want = hashes[n-1]
		}
		if r.Seq != uint64(len(out))+1 || r.Prev != want {
			return nil, Chain{}, fmt.Errorf("%w: %s/%s seq %d does not follow seq %d", ErrChain, r.Poll, r.Replica, r.Seq, len(out))
		}
		out = append(out, r)
		hashes = append(hashes, h)
	}
	c := Chain{Poll: out[0].Poll, Replica: out[0].Replica, Records: uint64(len(out)), Head: hashes[len(hashes)-1]}
	return out, c, nil
}

func bySeq(a, b *Record) int {
	switch {
	case a.Seq < b.Seq:
		return -1
	case a.Seq > b.Seq:
		return 1
	}
	return 0
}

// arena stores records in large chunks: one allocation per 8192 records,
// and no copying as the set grows.
type arena struct{ chunk []Record }

func (a *arena) add(r Record) *Record {
	if len(a.chunk) == cap(a.chunk) {
		a.chunk = make([]Record, 0, 8192)
	}
	a.chunk = append(a.chunk, r)
	return &a.chunk[len(a.chunk)-1]
}

// digest is the SHA-256 of a canonical text encoding of the result: fixed
// field order, quoted ids, options and replicas sorted.
func (r *Result) digest() string {
	h := sha256.New()
	line := func(parts ...string) {
		for i, p := range parts {
			if i > 0 {
				h.Write([]byte{' '})
			}
			h.Write([]byte(p))
		}
		h.Write([]byte{'\n'})
	}
	u := func(n uint64) string { return strconv.FormatUint(n, 10) }
	line("tally-result", "v1")
	line("poll", strconv.Quote(r.Poll))
	line("records", u(r.Records))
	line("duplicates", u(r.Duplicates))
	line("late", u(r.Late))
	line("shadowed", u(r.Shadowed))
	line("superseded", u(r.Superseded))
	line("voters", u(r.Voters))
	line("total", u(r.Total))
	if r.ClosesAt != 0 {
		line("closes_at", strconv.FormatInt(r.ClosesAt, 10))
	}
	if r.CloseRule != "" {
		line("close_rule", r.CloseRule, u(r.AfterClose))
	}
	for _, o := range slices.Sorted(maps.Keys(r.Totals)) {
		line("option", strconv.Quote(o), u(r.Totals[o]))
	}
	for _, c := range r.Replicas {
		line("replica", strconv.Quote(c.Replica), u(c.Records), c.Head.String())
	}
	if r.FirstWins {
		line("first_wins")
	}
	for _, a := range r.Answers {
		i := func(n int64) string { return strconv.FormatInt(n, 10) }
		line("answer", strconv.Quote(a.Voter), strconv.Quote(a.Option), i(a.ElapsedMs), i(a.Score), strconv.Quote(a.Name))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Disposition is what the rules made of one record.
type Disposition uint8

// Dispositions of a record (Disposed).
const (
	DispCounted    Disposition = iota + 1 // its voter's vote in the result
	DispSuperseded                        // another record of its voter counts instead
	DispLate                              // after the close: not counted
	DispShadowed                          // below the trust floor: not counted
	DispDuplicate                         // an earlier record of its idempotency key stands
)

// Disposed is every record of a reconcile in the result's order (the
// replicas' chains by replica id, each by seq: the order of a
// certificate's Merkle tree) with what the rules made of each, as
// ReconcileChains counted them.
type Disposed struct {
	Records []*Record
	Of      []Disposition
	// Other is, for a superseded record, the index of its voter's
	// counted one; for a duplicate, of the record that stands for its
	// key; -1 for the others.
	Other []int
}

// DisposeChains applies cfg's rules to the chains, as ReconcileChains
// does, and returns each record's disposition: what a voter's proof says
// became of their vote. The records are checked and put in order as
// ReconcileChains does.
func DisposeChains(cfg ReconcileConfig, chains ...[]*Record) (*Disposed, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	all, err := TreeOrder(cfg.Poll, chains...)
	if err != nil {
		return nil, err
	}
	d := &Disposed{Records: all}
	d.Of, d.Other = make([]Disposition, len(all)), make([]int, len(all))
	stands := make(map[string]int, len(all)) // idempotency key → the earliest record's index
	for i, r := range all {
		if f, ok := stands[r.Idem]; !ok || all[f].After(r) {
			stands[r.Idem] = i
		}
	}
	counted := make(map[string]int) // voter → its counted record's index
	for i, r := range all {
		d.Other[i] = -1
		switch f := stands[r.Idem]; {
		case f != i:
			d.Of[i], d.Other[i] = DispDuplicate, f
		case cfg.place(r) == placedLate:
			d.Of[i] = DispLate
		case cfg.place(r) == placedShadowed:
			d.Of[i] = DispShadowed
		default:
			if c, ok := counted[r.Voter]; !ok || cfg.prefer(r, all[c]) {
				counted[r.Voter] = i
			}
		}
	}
	for i, r := range all {
		if d.Of[i] != 0 {
			continue
		}
		if c := counted[r.Voter]; c == i {
			d.Of[i] = DispCounted
		} else {
			d.Of[i], d.Other[i] = DispSuperseded, c
		}
	}
	return d, nil
}

// TreeOrder checks the chains as ReconcileChains does (each linked from
// seq 1, a record held twice kept once) and returns their records in the
// result's order: by replica id, each chain by seq. A certificate's
// Merkle tree is built over their hashes in this order. poll, when set,
// is the poll every record must be of.
func TreeOrder(poll string, chains ...[]*Record) ([]*Record, error) {
	_, byReplica, err := byReplicaOf(poll, chains)
	if err != nil {
		return nil, err
	}
	replicas := slices.Sorted(maps.Keys(byReplica))
	if _, err := checkChains(replicas, byReplica); err != nil {
		return nil, err
	}
	var all []*Record
	for _, rep := range replicas {
		all = append(all, byReplica[rep]...)
	}
	return all, nil
}
