package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"iter"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"sync"
)

// Result is the exact, certified outcome of one poll, computed from the
// records of every replica. Records = Duplicates + Late + Shadowed +
// Superseded + Total.
type Result struct {
	Poll       string            `json:"poll"`
	Totals     map[string]uint64 `json:"totals"`     // option → counted votes
	Total      uint64            `json:"total"`      // counted votes: one per voter at most
	Voters     uint64            `json:"voters"`     // distinct voters among the non-duplicate records
	Records    uint64            `json:"records"`    // distinct records read
	Duplicates uint64            `json:"duplicates"` // retries: a (poll, idem) seen before by HLC order
	Late       uint64            `json:"late"`       // arrived after close, within grace
	Shadowed   uint64            `json:"shadowed"`   // not counted: below the trust floor
	Superseded uint64            `json:"superseded"` // a voter's earlier votes, replaced by a later one
	Replicas   []Chain           `json:"replicas"`   // every replica's record count and chain head
	Digest     string            `json:"digest"`     // SHA-256 over the canonical encoding of all of the above
}

// ReconcileConfig adjusts Reconcile.
type ReconcileConfig struct {
	// TrustFloor, when above zero, also shadows counted records whose
	// trust score is below it.
	TrustFloor float64
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
//     is counted; the earlier ones are superseded.
//
// The result, digest included, depends only on the set of records, not on
// the order of streams or of records within them.
func ReconcileWith(cfg ReconcileConfig, streams ...iter.Seq2[Record, error]) (*Result, error) {
	byReplica := make(map[string][]Record)
	poll := ""
	for _, s := range streams {
		for r, err := range s {
			if err != nil {
				return nil, err
			}
			if poll == "" {
				poll = r.Poll
			} else if r.Poll != poll {
				return nil, fmt.Errorf("%w: records of polls %q and %q in one reconcile", ErrInvalid, poll, r.Poll)
			}
			byReplica[r.Replica] = append(byReplica[r.Replica], r)
		}
	}
	replicas := slices.Sorted(maps.Keys(byReplica))
	chains, err := checkChains(replicas, byReplica)
	if err != nil {
		return nil, err
	}
	res := &Result{Poll: poll, Totals: make(map[string]uint64), Replicas: chains}

	// First pass: the earliest record of each idempotency key stands.
	first := make(map[string]*Record)
	for _, rep := range replicas {
		recs := byReplica[rep]
		for i := range recs {
			r := &recs[i]
			res.Records++
			if f, ok := first[r.Idem]; !ok || f.After(r) {
				first[r.Idem] = r
			}
		}
	}
	res.Duplicates = res.Records - uint64(len(first))

	// Second pass: per voter, the latest counted record wins.
	latest := make(map[string]*Record)
	voters := make(map[string]struct{})
	for _, r := range first {
		voters[r.Voter] = struct{}{}
		switch {
		case r.Late:
			res.Late++
		case !r.Counted || r.Trust < cfg.TrustFloor:
			res.Shadowed++
		default:
			if l, ok := latest[r.Voter]; !ok || r.After(l) {
				latest[r.Voter] = r
			}
		}
	}
	for _, r := range latest {
		res.Totals[r.Option]++
	}
	res.Voters = uint64(len(voters))
	res.Total = uint64(len(latest))
	res.Superseded = res.Records - res.Duplicates - res.Late - res.Shadowed - res.Total
	res.Digest = res.digest()
	return res, nil
}

// checkChains sorts each replica's records by seq, drops identical copies,
// and verifies the chain. Replicas are checked in parallel: hashing every
// record is most of the work.
func checkChains(replicas []string, byReplica map[string][]Record) ([]Chain, error) {
	chains := make([]Chain, len(replicas))
	checked := make([][]Record, len(replicas))
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

func checkChain(recs []Record) ([]Record, Chain, error) {
	if !slices.IsSortedFunc(recs, bySeq) {
		slices.SortStableFunc(recs, bySeq)
	}
	out := recs[:0]
	var hashes []Hash
	for i := range recs {
		r := recs[i]
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

func bySeq(a, b Record) int {
	switch {
	case a.Seq < b.Seq:
		return -1
	case a.Seq > b.Seq:
		return 1
	}
	return 0
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
	for _, o := range slices.Sorted(maps.Keys(r.Totals)) {
		line("option", strconv.Quote(o), u(r.Totals[o]))
	}
	for _, c := range r.Replicas {
		line("replica", strconv.Quote(c.Replica), u(c.Records), c.Head.String())
	}
	return hex.EncodeToString(h.Sum(nil))
}
