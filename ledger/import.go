package ledger

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"iter"
	"slices"

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

// ImportSigned is Import of at most 1,024 records (one commit) with
// signed heads of their chains, written in the same batch and fsync: a
// buddy's copy (package buddy), so a record is never stored without the
// head that vouches for it. Each head must verify with the key it carries
// (whose key that is, the caller judges) and be the head of one of recs;
// one that is not is ErrInvalid, and nothing is written. A head is kept
// where it is the head of its chain as the import leaves it (SignedHead
// reads it); an older one (its records held already, and more since) is
// not kept.
func (l *Ledger) ImportSigned(recs []Record, heads []SignedHead) (ImportStats, error) {
	switch {
	case len(recs) > importChunk:
		return ImportStats{}, fmt.Errorf("%w: %d records with signed heads, at most %d", ErrInvalid, len(recs), importChunk)
	case len(recs) == 0 && len(heads) > 0:
		return ImportStats{}, fmt.Errorf("%w: signed heads without their records", ErrInvalid)
	case len(recs) == 0:
		return ImportStats{}, nil
	}
	for i := range recs {
		if err := recs[i].Validate(); err != nil {
			return ImportStats{}, err
		}
	}
	for i := range heads {
		h := &heads[i]
		j := slices.IndexFunc(recs, func(r Record) bool { return r.Poll == h.Poll && r.Replica == h.Replica && r.Seq == h.Seq })
		if j < 0 || recs[j].Hash() != h.Hash {
			return ImportStats{}, fmt.Errorf("%w: the signed head of %s/%s (seq %d) is not the head of a record it comes with", ErrInvalid, h.Poll, h.Replica, h.Seq)
		}
		if !h.Verify() {
			return ImportStats{}, fmt.Errorf("%w: the signed head of %s/%s (seq %d) does not verify", ErrInvalid, h.Poll, h.Replica, h.Seq)
		}
	}
	req := &request{recs: recs, import_: true, heads: heads, out: make([]Appended, len(recs)), done: make(chan struct{})}
	if err := l.submit(req); err != nil {
		return ImportStats{}, err
	}
	var st ImportStats
	for _, a := range req.out {
		if a.Duplicate {
			st.Present++
		} else {
			st.Written++
		}
	}
	return st, req.err
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
			same, err := sameRecord(l.db, rk, enc)
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
	if err := stageSignedHeads(c, req.heads, heads, l.heads); err != nil {
		return err
	}
	for chain, h := range heads {
		l.heads[chain] = h
		touched[chain] = struct{}{}
	}
	return nil
}

func sameRecord(db pebble.Reader, key, enc []byte) (bool, error) {
	v, closer, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ledger: cannot read record: %w", err)
	}
	defer closer.Close()
	return bytes.Equal(v, enc), nil
}

// stageSignedHeads adds to the batch each signed head of an import that is
// the head of its chain as the import leaves it (staged, else held): the
// latest vouches for every record before it. A head of records already
// held, some of them since, is not kept.
func stageSignedHeads(c *commit, signed []SignedHead, staged, held map[chainID]head) error {
	for i := range signed {
		s := &signed[i]
		chain := chainID{poll: s.Poll, replica: s.Replica}
		h, ok := staged[chain]
		if !ok {
			h = held[chain]
		}
		if s.Seq != h.seq || s.Hash != h.hash {
			continue
		}
		if err := c.batch.Set(signedHeadKey(s.Poll, s.Replica), s.AppendBinary(nil), nil); err != nil {
			return err
		}
	}
	return nil
}
