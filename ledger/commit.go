package ledger

import (
	"crypto/sha256"
	"errors"
	"fmt"

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
	out     []Appended
	err     error
	done    chan struct{}
}

// pendingKey is an idempotency key written by a commit not yet fsynced.
type pendingKey struct {
	c  *commit
	id VoteID
}

// commit is one Pebble batch applied and waiting for its fsync.
type commit struct {
	batch   *pebble.Batch
	reqs    []*request
	keys    []string // idempotency keys registered in Ledger.pending
	records uint64
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
	c := &commit{batch: l.db.NewBatch(), synced: make(chan struct{})}
	local := make(map[string]VoteID)
	touched := make(map[chainID]struct{})
	var keyBuf, valBuf []byte
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
		} else if err := l.stageAppend(c, req, local, touched, &keyBuf, &valBuf); err != nil {
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
	// Register the keys before the batch leaves this goroutine: until it
	// is fsynced, later batches and Lookup find them here.
	l.mu.Lock()
	for _, k := range c.keys {
		l.pending[k] = pendingKey{c: c, id: local[k]}
	}
	l.mu.Unlock()
	return c
}

// stageAppend adds one Append request's records to the batch.
func (l *Ledger) stageAppend(c *commit, req *request, local map[string]VoteID, touched map[chainID]struct{}, keyBuf, valBuf *[]byte) error {
	for i := range req.recs {
		r := &req.recs[i]
		ik := idemKey((*keyBuf)[:0], r.Poll, r.Idem)
		*keyBuf = ik
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
		enc := r.AppendBinary((*valBuf)[:0])
		*valBuf = enc
		l.heads[chain] = head{seq: r.Seq, hash: sha256.Sum256(enc)}
		touched[chain] = struct{}{}
		id := r.ID()
		if err := c.batch.Set(recordKey(nil, r.Poll, r.Replica, r.Seq), enc, nil); err != nil {
			return err
		}
		if err := c.batch.Set(ik, encodeVoteID(nil, id), nil); err != nil {
			return err
		}
		l.filter.add(ik)
		key := string(ik)
		local[key] = id
		c.keys = append(c.keys, key)
		c.records++
		req.out[i] = Appended{ID: id}
	}
	return nil
}

// findIdem looks a key up among the unsynced commits, then in Pebble.
func (l *Ledger) findIdem(k []byte) (VoteID, bool, error) {
	l.mu.Lock()
	p, ok := l.pending[string(k)]
	l.mu.Unlock()
	if ok {
		return p.id, true, nil
	}
	return l.getIdem(k)
}

func (l *Ledger) getIdem(k []byte) (VoteID, bool, error) {
	v, closer, err := l.db.Get(k)
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
	for c := range l.inflight {
		err := c.batch.SyncWait()
		c.batch.Close()
		if err != nil {
			err = fmt.Errorf("%w: fsync: %w", ErrBroken, err)
		}
		l.settle(c, err)
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
	for _, k := range c.keys {
		delete(l.pending, k)
	}
	if err != nil && l.broken == nil {
		l.broken = err
	}
	l.mu.Unlock()
	c.err = err
	close(c.synced)
	if err == nil {
		l.commits.Add(1)
	}
	for _, req := range c.reqs {
		if err == nil {
			l.count(req)
		}
	}
	finish(c.reqs, err)
}

func (l *Ledger) count(req *request) {
	if req.import_ {
		l.imported.Add(uint64(len(req.out)))
		return
	}
	for _, a := range req.out {
		if a.Duplicate {
			l.duplicates.Add(1)
		} else {
			l.appended.Add(1)
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
