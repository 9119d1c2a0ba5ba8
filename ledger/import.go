package ledger

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"iter"

	"github.com/cockroachdb/pebble"
)

// rejectError marks an import request refused for its content; unlike a
// storage error it does not break the ledger.
type rejectError struct{ err error }

func (e *rejectError) Error() string { return e.err.Error() }

// ImportStats says what Import did.
type ImportStats struct {
	Written uint64 // records new to this ledger
	Present uint64 // records already stored, byte for byte
}

// importChunk is how many records one import request carries.
const importChunk = 1024

// Import writes records exported from any replica's ledger. Each replica's
// records must continue the chain this ledger holds for it (sequence
// numbers without gaps, matching previous hashes); a record already stored
// byte for byte is skipped, so importing the same export twice is harmless.
// A record conflicting with a stored one fails with ErrConflict, a gap or a
// wrong link with ErrChain. Records are committed in chunks; on error the
// chunks before it stay written.
func (l *Ledger) Import(records iter.Seq2[Record, error]) (ImportStats, error) {
	var st ImportStats
	chunk := make([]Record, 0, importChunk)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		req := &request{recs: chunk, import_: true, out: make([]Appended, len(chunk)), done: make(chan struct{})}
		if err := l.submit(req); err != nil {
			return err
		}
		if req.err != nil {
			return req.err
		}
		for _, a := range req.out {
			if a.Duplicate {
				st.Present++
			} else {
				st.Written++
			}
		}
		chunk = make([]Record, 0, importChunk)
		return nil
	}
	for r, err := range records {
		if err != nil {
			return st, err
		}
		if err := r.Validate(); err != nil {
			return st, err
		}
		if chunk = append(chunk, r); len(chunk) == importChunk {
			if err := flush(); err != nil {
				return st, err
			}
		}
	}
	return st, flush()
}

// stageImport checks one import request against the chains and, only if
// every record passes, adds its writes to the batch.
func (l *Ledger) stageImport(c *commit, req *request, local map[string]VoteID, touched map[chainID]struct{}) error {
	type write struct{ k, v []byte }
	var writes []write
	heads := make(map[chainID]head)
	staged := make(map[string]bool) // record keys written earlier in this request
	indexed := make(map[string]VoteID)
	for i := range req.recs {
		r := &req.recs[i]
		chain := chainID{poll: r.Poll, replica: r.Replica}
		h, ok := heads[chain]
		if !ok {
			h = l.heads[chain]
		}
		enc := r.AppendBinary(nil)
		rk := recordKey(nil, r.Poll, r.Replica, r.Seq)
		if r.Seq <= h.seq {
			if staged[string(rk)] {
				req.out[i] = Appended{ID: r.ID(), Duplicate: true}
				continue
			}
			same, err := l.sameRecord(rk, enc)
			if err != nil {
				return err
			}
			if !same {
				return &rejectError{fmt.Errorf("%w: %s/%s seq %d", ErrConflict, r.Poll, r.Replica, r.Seq)}
			}
			req.out[i] = Appended{ID: r.ID(), Duplicate: true}
			continue
		}
		if r.Seq != h.seq+1 || r.Prev != h.hash {
			return &rejectError{fmt.Errorf("%w: %s/%s seq %d does not follow seq %d",
				ErrChain, r.Poll, r.Replica, r.Seq, h.seq)}
		}
		heads[chain] = head{seq: r.Seq, hash: sha256.Sum256(enc)}
		staged[string(rk)] = true
		writes = append(writes, write{rk, enc})
		if l.noIndex {
			req.out[i] = Appended{ID: r.ID()}
			c.records++
			continue
		}
		ik := idemKey(nil, r.Poll, r.Idem)
		_, dupBatch := local[string(ik)]
		if _, dupReq := indexed[string(ik)]; !dupBatch && !dupReq {
			// The index keeps the first vote id it saw for a key; a retry
			// that reached two regions stays two records, and Reconcile
			// keeps the earliest.
			_, found, err := l.findIdem(ik)
			if err != nil {
				return err
			}
			if !found {
				indexed[string(ik)] = r.ID()
				writes = append(writes, write{ik, encodeVoteID(nil, r.ID())})
			}
		}
		req.out[i] = Appended{ID: r.ID()}
		c.records++
	}
	for _, w := range writes {
		if err := c.batch.Set(w.k, w.v, nil); err != nil {
			return err
		}
	}
	for k, id := range indexed {
		l.filter.add([]byte(k))
		local[k] = id
	}
	for chain, h := range heads {
		l.heads[chain] = h
		touched[chain] = struct{}{}
	}
	return nil
}

func (l *Ledger) sameRecord(key, enc []byte) (bool, error) {
	v, closer, err := l.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ledger: cannot read record: %w", err)
	}
	defer closer.Close()
	return bytes.Equal(v, enc), nil
}
