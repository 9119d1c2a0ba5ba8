package ledger

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
)

// Appended is the outcome of one record passed to Append.
type Appended struct {
	ID        VoteID // the vote id: new, or the first one for a duplicate
	Duplicate bool   // the (poll, idem) was already ledgered; nothing was written
}

// request is one Append or Import call waiting for the committer.
type request struct {
	recs    []Record
	import_ bool
	heads   []SignedHead // an import's signed heads (ImportSigned)
	out     []Appended
	err     error
	done    chan struct{}
}

// commit is one Pebble batch applied and waiting for its fsync.
type commit struct {
	batch   *pebble.Batch
	reqs    []*request
	ids     map[string]VoteID // idempotency key → vote id, for every key it writes
	records uint64
	started time.Time
	synced  chan struct{} // closed once the fsync outcome is known
	err     error
}

// Append ledgers the records and returns once they are durable (the batch
// holding them is fsynced). The ledger assigns Replica, Seq and Prev; the
// caller fills in the vote fields. A record whose (poll, idem) was already
// ledgered is not written again: its result is the first vote id with
// Duplicate set. Records of one call are committed atomically together.
func (l *Ledger) Append(recs ...Record) ([]Appended, error) {
	if l.replica == "" {
		return nil, ErrNoReplica
	}
	for i := range recs {
		if err := recs[i].ValidateVote(); err != nil {
			return nil, err
		}
	}
	req := &request{recs: recs, out: make([]Appended, len(recs)), done: make(chan struct{})}
	if err := l.submit(req); err != nil {
		return nil, err
	}
	return req.out, req.err
}

func (l *Ledger) submit(req *request) error {
	if l.readOnly {
		return ErrReadOnly
	}
	l.sendMu.RLock()
	if l.closed {
		l.sendMu.RUnlock()
		return ErrClosed
	}
	l.queue <- req
	l.sendMu.RUnlock()
	<-req.done
	return nil
}

// commitLoop is the single committer: it coalesces queued requests into one
// batch, assigns sequence numbers and chain links and checks idempotency.
// Three goroutines form a pipeline, so that while one batch waits for its
// fsync the next is applied to the memtable and a third is being built:
// commitLoop (build) → applyLoop (apply, in order) → syncLoop (fsync wait).
func (l *Ledger) commitLoop() {
	defer l.wg.Done()
	defer close(l.staged)
	for req := range l.queue {
		reqs, n := []*request{req}, len(req.recs)
	drain:
		for n < l.maxBatch {
			select {
			case r, ok := <-l.queue:
				if !ok {
					break drain
				}
				reqs, n = append(reqs, r), n+len(r.recs)
			default:
				break drain
			}
		}
		if c := l.prepare(reqs); c != nil {
			l.staged <- c
		}
	}
}

// applyLoop applies built batches to Pebble in order without waiting for
// their fsync.
func (l *Ledger) applyLoop() {
	defer l.wg.Done()
	defer close(l.inflight)
	for c := range l.staged {
		l.mu.Lock()
		broken := l.broken
		l.mu.Unlock()
		if broken != nil {
			l.fail(c, broken)
			continue
		}
		if err := l.db.ApplyNoSyncWait(c.batch, pebble.Sync); err != nil {
			l.fail(c, err)
			continue
		}
		l.inflight <- c
	}
}

// prepare builds one batch. It returns nil when no request is
// left waiting for an fsync. A request that fails validation (an import
// that does not continue its chain) fails alone; a storage error fails the
// whole batch and breaks the ledger, so no partial request is ever written.
func (l *Ledger) prepare(reqs []*request) *commit {
	l.mu.Lock()
	broken := l.broken
	l.mu.Unlock()
	if broken != nil {
		finish(reqs, fmt.Errorf("%w: %w", ErrBroken, broken))
		return nil
	}
	n := 0
	for _, r := range reqs {
		n += len(r.recs)
	}
	c := &commit{started: time.Now(), batch: l.db.NewBatchWithSize(n * 320), synced: make(chan struct{}), ids: make(map[string]VoteID, n)}
	local := c.ids
	touched := make(map[chainID]struct{})
	var buf scratch
	for _, req := range reqs {
		if req.import_ {
			if err := l.stageImport(c, req, local, touched); err != nil {
				var reject *rejectError
				if !errors.As(err, &reject) {
					c.reqs = reqs
					l.fail(c, err)
					return nil
				}
				req.err = reject.err
				close(req.done)
				continue
			}
		} else if err := l.stageAppend(c, req, local, touched, &buf); err != nil {
			c.reqs = reqs
			l.fail(c, err)
			return nil
		}
		c.reqs = append(c.reqs, req)
	}
	for id := range touched {
		if err := c.batch.Set(headKey(id.poll, id.replica), l.heads[id].encode(), nil); err != nil {
			c.reqs = reqs
			l.fail(c, err)
			return nil
		}
	}
	if len(c.reqs) == 0 {
		c.batch.Close()
		return nil
	}
	// Publish the commit before it leaves this goroutine: until it is
	// fsynced, later batches and Lookup find its keys here.
	l.mu.Lock()
	l.unsynced = append(l.unsynced, c)
	l.mu.Unlock()
	return c
}

// stageAppend adds one Append request's records to the batch.
// scratch holds buffers reused across the records of one batch; the batch
// copies what it is given.
type scratch struct{ idem, key, val, id []byte }

func (l *Ledger) stageAppend(c *commit, req *request, local map[string]VoteID, touched map[chainID]struct{}, buf *scratch) error {
	for i := range req.recs {
		r := &req.recs[i]
		buf.idem = idemKey(buf.idem[:0], r.Poll, r.Idem)
		ik := buf.idem
		if id, ok := local[string(ik)]; ok {
			req.out[i] = Appended{ID: id, Duplicate: true}
			continue
		}
		if l.filter.mayContain(ik) {
			id, found, err := l.findIdem(ik)
			if err != nil {
				return err
			}
			if found {
				req.out[i] = Appended{ID: id, Duplicate: true}
				continue
			}
		}
		chain := chainID{poll: r.Poll, replica: l.replica}
		h := l.heads[chain]
		r.Replica, r.Seq, r.Prev = l.replica, h.seq+1, h.hash
		r.summed = false // its place changed: its hash is computed anew
		buf.val = r.AppendBinary(buf.val[:0])
		enc := buf.val
		sum := sha256.Sum256(enc)
		l.heads[chain] = head{seq: r.Seq, hash: sum}
		r.sum, r.summed = sum, true // the caller's receipt reads it (Record.Hash) without encoding the record again
		touched[chain] = struct{}{}
		id := r.ID()
		buf.key = recordKey(buf.key[:0], r.Poll, r.Replica, r.Seq)
		if err := c.batch.Set(buf.key, enc, nil); err != nil {
			return err
		}
		buf.id = encodeVoteID(buf.id[:0], id)
		if err := c.batch.Set(ik, buf.id, nil); err != nil {
			return err
		}
		l.filter.add(ik)
		local[string(ik)] = id
		c.records++
		req.out[i] = Appended{ID: id}
	}
	return nil
}

// findIdem looks a key up among the unsynced commits, then in Pebble.
func (l *Ledger) findIdem(k []byte) (VoteID, bool, error) {
	if c, id := l.unsyncedWith(k); c != nil {
		return id, true, nil
	}
	return getIdem(l.db, k)
}

// unsyncedWith returns the unsynced commit that wrote key, if any.
func (l *Ledger) unsyncedWith(key []byte) (*commit, VoteID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.unsynced {
		if id, ok := c.ids[string(key)]; ok {
			return c, id
		}
	}
	return nil, VoteID{}
}

func getIdem(db pebble.Reader, k []byte) (VoteID, bool, error) {
	v, closer, err := db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return VoteID{}, false, nil
	}
	if err != nil {
		return VoteID{}, false, fmt.Errorf("ledger: cannot check idempotency key: %w", err)
	}
	defer closer.Close()
	id, err := decodeVoteID(v)
	return id, err == nil, err
}

// syncLoop waits for each applied batch's fsync, in order, and releases
// the callers.
func (l *Ledger) syncLoop() {
	defer l.wg.Done()
	if l.copying != nil {
		defer close(l.copying)
	}
	for c := range l.inflight {
		err := c.batch.SyncWait()
		c.batch.Close()
		if err != nil {
			l.settle(c, fmt.Errorf("%w: fsync: %w", ErrBroken, err))
			continue
		}
		if l.copying != nil {
			l.copying <- c // the copier settles it
			continue
		}
		l.settle(c, nil)
	}
}

// fail ends a batch that could not be applied and breaks the ledger.
func (l *Ledger) fail(c *commit, err error) {
	c.batch.Close()
	l.settle(c, fmt.Errorf("%w: commit: %w", ErrBroken, err))
}

// settle publishes a commit's outcome to Lookup and to its callers.
func (l *Ledger) settle(c *commit, err error) {
	l.mu.Lock()
	if i := slices.Index(l.unsynced, c); i >= 0 {
		l.unsynced = slices.Delete(l.unsynced, i, i+1)
	}
	if err != nil && l.broken == nil {
		l.broken = err
	}
	l.mu.Unlock()
	c.err = err
	close(c.synced)
	if err == nil {
		l.n.commits.Add(1)
		if l.onCommit != nil {
			l.onCommit(int(c.records), time.Since(c.started))
		}
	}
	for _, req := range c.reqs {
		if err == nil {
			l.n.count(req)
		}
	}
	finish(c.reqs, err)
}

// counters are a ledger's counts of what it wrote since Open (Stats).
type counters struct{ appended, duplicates, imported, commits atomic.Uint64 }

// count counts a settled request's records.
func (n *counters) count(req *request) {
	if req.import_ {
		n.imported.Add(uint64(len(req.out)))
		return
	}
	for _, a := range req.out {
		if a.Duplicate {
			n.duplicates.Add(1)
		} else {
			n.appended.Add(1)
		}
	}
}

func finish(reqs []*request, err error) {
	for _, req := range reqs {
		if err != nil {
			req.err = err
		}
		close(req.done)
	}
}
