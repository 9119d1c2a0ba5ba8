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
	copyMu sync.Mutex // one Copy at a time: the stage's and EnsureCopied's
	mu     sync.Mutex // guards marks
	marks  map[chainID]uint64
}

// maxCopyGroup bounds the synced batches one copy carries.
const maxCopyGroup = 64

// run is the stage's goroutine: syncLoop hands it every synced batch.
// The batches that queued while a copy was in flight go in the next copy
// together (group commit, as the ledger's fsync does): one round trip to
// the second machine and one fsync there for all of them.
func (cs *copyStage) run(l *Ledger) {
	defer l.wg.Done()
	for c := range l.copying {
		group := []*commit{c}
	more:
		for len(group) < maxCopyGroup {
			select {
			case next, ok := <-l.copying:
				if !ok {
					break more
				}
				group = append(group, next)
			default:
				break more
			}
		}
		cs.copyGroup(l, group)
	}
}

// copyGroup copies the records of a group of synced batches in one call,
// then releases their callers in order: each batch's appends fail with
// ErrNotCopied where its records could not be read or the copy failed.
func (cs *copyStage) copyGroup(l *Ledger, group []*commit) {
	errs := make([]error, len(group))
	var recs []Record
	for i, c := range group {
		r, err := cs.toCopy(l, c)
		if err != nil {
			errs[i] = fmt.Errorf("%w: %w", ErrNotCopied, err)
			continue
		}
		recs = append(recs, r...)
	}
	if len(recs) > 0 {
		if err := cs.copy(sortRecords(recs)); err != nil {
			for i := range errs {
				errs[i] = cmp.Or(errs[i], err)
			}
		}
	}
	for i, c := range group {
		if errs[i] != nil {
			for _, req := range c.reqs {
				if !req.import_ {
					req.err = errs[i]
				}
			}
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
	return sortRecords(out), nil
}

// sortRecords orders this replica's records by poll and seq, each once.
func sortRecords(recs []Record) []Record {
	slices.SortFunc(recs, func(a, b Record) int {
		return cmp.Or(cmp.Compare(a.Poll, b.Poll), cmp.Compare(a.Seq, b.Seq))
	})
	return slices.CompactFunc(recs, func(a, b Record) bool { return a.Poll == b.Poll && a.Seq == b.Seq })
}

// copy has the Copier copy recs and raises the marks, one call at a
// time; its error wraps ErrNotCopied.
func (cs *copyStage) copy(recs []Record) error {
	cs.copyMu.Lock()
	defer cs.copyMu.Unlock()
	if err := cs.copier.Copy(recs); err != nil {
		return fmt.Errorf("%w: %w", ErrNotCopied, err)
	}
	cs.mark(recs)
	return nil
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

// EnsureCopied returns nil once this replica's vote id of the poll is on
// a second machine: at once for an id known to be (and without a Copier,
// and for other replicas' ids), else after copying its record — and what
// the second machine lacks before it — as a batch is copied. The marks
// start at zero when the ledger opens, so after a restart a retry's first
// answer copies (the buddy holds it already and says so). An error wraps
// ErrNotCopied: the vote is in this ledger, its second copy unconfirmed.
// A retry may be answered from the id only on nil.
func (l *Ledger) EnsureCopied(poll string, id VoteID) error {
	if l.copies == nil || id.Replica != l.replica || l.copies.has(poll, id) {
		return nil
	}
	r, err := recordAt(l, poll, id)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotCopied, err)
	}
	return l.copies.copy([]Record{r})
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
