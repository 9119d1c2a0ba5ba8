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
// continue the chain it holds before they are fsynced (ledger.Import).
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

// take stores from's records, which continue its chains: fsynced when it
// returns statusOK. Records it holds already, byte for byte, are kept
// once; records after a gap answer statusBehind with where each chain of
// the request ends in the store; records that differ from the stored
// ones answer statusRefuse.
func (s *Store) take(from string, recs []ledger.Record) (reply, error) {
	_, err := s.l.Import(ledger.RecordsOf(recs))
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
// after, in sequence order: what certification reads when the replica is
// gone (GET /v1/polls/{poll}/ledger?copy_of=).
func (s *Store) Records(poll, replica string, after uint64) iter.Seq2[ledger.Record, error] {
	return s.l.ScanAfter(poll, replica, after)
}

// Polls lists the polls the store holds copies of.
func (s *Store) Polls() ([]string, error) { return s.l.Polls() }

// Scan yields every copy the store holds of poll, chain after chain.
func (s *Store) Scan(poll string) iter.Seq2[ledger.Record, error] { return s.l.Scan(poll) }
