package buddy

import (
	"errors"
	"fmt"
	"iter"
	"log/slog"

	"github.com/cockroachdb/pebble/vfs"

	"tally/ledger"
)

// Store is a buddy's durable copy of other full nodes' chains: a Pebble
// ledger that only imports, so each replica's records are checked to
// continue the chain it holds before they are fsynced, with the
// replica's signed head of each chain in the same batch
// (ledger.ImportSigned).
type Store struct {
	l *ledger.Ledger
}

// OpenStore opens (creating if needed) the store in dir. fs may be nil
// (the OS); tests pass vfs.NewStrictMem().
func OpenStore(dir string, fs vfs.FS, log *slog.Logger) (*Store, error) {
	l, err := ledger.Open(ledger.Config{Dir: dir, FS: fs, Logger: log, NoIndex: true}) // read by chain, never by key
	if err != nil {
		return nil, fmt.Errorf("buddy: store %s: %w", dir, err)
	}
	return &Store{l: l}, nil
}

// Close closes the store once the imports in flight are fsynced.
func (s *Store) Close() error { return s.l.Close() }

// take stores a request's records, which continue its sender's chains,
// and their signed heads: fsynced together when it returns statusOK.
// Records it holds already, byte for byte, are kept once; records after a
// gap answer statusBehind with where each chain of the request ends in
// the store; records that differ from the stored ones, and heads that do
// not verify, answer statusRefuse.
func (s *Store) take(req request) (reply, error) {
	from, recs := req.From, req.Recs
	_, err := s.l.ImportSigned(recs, req.Heads)
	switch {
	case err == nil:
		return reply{Status: statusOK}, nil
	case errors.Is(err, ledger.ErrChain):
		rep := reply{Status: statusBehind}
		seen := map[string]bool{}
		for _, r := range recs {
			if seen[r.Poll] {
				continue
			}
			seen[r.Poll] = true
			n, _, err := s.l.Head(r.Poll, from)
			if err != nil {
				return reply{}, err
			}
			rep.Heads = append(rep.Heads, head{Poll: r.Poll, Seq: n})
		}
		return rep, nil
	case errors.Is(err, ledger.ErrConflict), errors.Is(err, ledger.ErrInvalid):
		return reply{Status: statusRefuse, Reason: err.Error()}, nil
	default:
		return reply{}, err
	}
}

// Head returns how many of replica's records of poll the store holds.
func (s *Store) Head(poll, replica string) (uint64, error) {
	n, _, err := s.l.Head(poll, replica)
	return n, err
}

// Records yields the store's copy of replica's chain for poll above seq
// after, in sequence order, signed or not.
func (s *Store) Records(poll, replica string, after uint64) iter.Seq2[ledger.Record, error] {
	return s.l.ScanAfter(poll, replica, after)
}

// Copy is what certification reads when the replica is gone (GET
// /v1/polls/{poll}/ledger?copy_of=): the store's copy of replica's chain
// for poll above seq after, up to the replica's signed head, and that
// head. Without one (a copy an earlier release stored) it yields every
// record and a nil head; with after at or past the head, nothing.
func (s *Store) Copy(poll, replica string, after uint64) (iter.Seq2[ledger.Record, error], *ledger.SignedHead, error) {
	h, ok, err := s.l.SignedHead(poll, replica)
	if err != nil {
		return nil, nil, fmt.Errorf("buddy: the copy of %s/%s: %w", poll, replica, err)
	}
	if !ok {
		return s.l.ScanAfter(poll, replica, after), nil, nil
	}
	if after >= h.Seq {
		return ledger.RecordsOf(nil), nil, nil
	}
	signed := func(yield func(ledger.Record, error) bool) {
		for r, err := range s.l.ScanAfter(poll, replica, after) {
			if err == nil && r.Seq > h.Seq {
				return
			}
			if !yield(r, err) || err != nil {
				return
			}
		}
	}
	return signed, &h, nil
}

// Polls lists the polls the store holds copies of.
func (s *Store) Polls() ([]string, error) { return s.l.Polls() }

// Scan yields every copy the store holds of poll, chain after chain.
func (s *Store) Scan(poll string) iter.Seq2[ledger.Record, error] { return s.l.Scan(poll) }
