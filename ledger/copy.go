package ledger

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
)

// ErrNotCopied wraps the reason a synced batch's records could not be
// copied to a second machine (Config.Copier): they are in this ledger,
// durable here, but their acknowledgement promised two machines.
var ErrNotCopied = errors.New("ledger: not copied to a second machine")

// Copier makes this replica's records durable on a second machine
// before their appends return (package buddy: the buddy's copy). Copy
// is given each synced batch's records of this replica in sequence
// order per chain — the new ones, and the earliest not yet copied that
// a duplicate answered — and returns once the second machine holds them
// and every record before them in their chains, or why it cannot. It is
// called from one goroutine, batch after batch, in commit order.
type Copier interface {
	Copy(recs []Record) error
}

// copyStage is the ledger's last pipeline stage where a Copier is set:
// it copies each synced batch's records, in order, then releases its
// callers, so an Append returns only once its records are on two
// machines, or with ErrNotCopied (its records are ledgered all the
// same). marks say, per chain of this replica, up to which seq the
// Copier holds it.
type copyStage struct {
	copier Copier
	mu     sync.Mutex
	marks  map[chainID]uint64
}

// run is the stage's goroutine: syncLoop hands it every synced batch.
func (cs *copyStage) run(l *Ledger) {
	defer l.wg.Done()
	for c := range l.copying {
		recs, err := cs.toCopy(l, c)
		if err == nil && len(recs) > 0 {
			err = cs.copier.Copy(recs)
		}
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrNotCopied, err)
			for _, req := range c.reqs {
				if !req.import_ {
					req.err = err
				}
			}
		} else {
			cs.mark(recs)
		}
		l.settle(c, nil)
	}
}

// toCopy returns the records a synced batch asks to be on a second
// machine: its new records of this replica, and for each duplicate the
// record it answered with where that is this replica's and not yet known
// to be copied (its first append's copy may have failed, or the node
// restarted since).
func (cs *copyStage) toCopy(l *Ledger, c *commit) ([]Record, error) {
	var out []Record
	for _, req := range c.reqs {
		if req.import_ {
			continue
		}
		for i, a := range req.out {
			switch {
			case !a.Duplicate:
				out = append(out, req.recs[i])
			case a.ID.Replica == l.replica && !cs.has(req.recs[i].Poll, a.ID):
				r, err := recordAt(l, req.recs[i].Poll, a.ID)
				if err != nil {
					return nil, err
				}
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, func(a, b Record) int {
		return cmp.Or(cmp.Compare(a.Poll, b.Poll), cmp.Compare(a.Seq, b.Seq))
	})
	return slices.CompactFunc(out, func(a, b Record) bool { return a.Poll == b.Poll && a.Seq == b.Seq }), nil
}

// recordAt reads one of the ledger's records by its vote id.
func recordAt(l *Ledger, poll string, id VoteID) (Record, error) {
	for r, err := range l.ScanAfter(poll, id.Replica, id.Seq-1) {
		if err != nil {
			return Record{}, err
		}
		if r.Seq == id.Seq {
			return r, nil
		}
		break
	}
	return Record{}, fmt.Errorf("%w: no record %s of poll %s", ErrChain, id, poll)
}

// mark raises the mark of each chain to the highest record of recs: the
// Copier holds every record up to it.
func (cs *copyStage) mark(recs []Record) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, r := range recs {
		k := chainID{r.Poll, r.Replica}
		cs.marks[k] = max(cs.marks[k], r.Seq)
	}
}

func (cs *copyStage) has(poll string, id VoteID) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.marks[chainID{poll, id.Replica}] >= id.Seq
}

// Copied reports whether this replica's vote id of the poll is known to
// be on a second machine: true for every id without a Copier, and for
// ids of other replicas. A retry answered from it may be acknowledged.
// The marks start at zero when the ledger opens; a duplicate's append
// raises them (toCopy).
func (l *Ledger) Copied(poll string, id VoteID) bool {
	return l.copies == nil || id.Replica != l.replica || l.copies.has(poll, id)
}

// RecordsOf yields recs, for Import and Reconcile.
func RecordsOf(recs []Record) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}
