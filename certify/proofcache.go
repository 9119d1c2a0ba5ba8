package certify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tally/ledger"
	"tally/receipt"
	"tally/state"
)

// The proof indexes a node keeps (proofs.go builds and serves them):
// built once however many voters ask at the same time, at most
// keptIndexes of them, each owned by the certifier until its Run ends.

// proofs keeps the indexes, and builds each once however many voters
// ask at the same time.
type proofs struct {
	now    func() time.Time       // monotonic
	built  *prometheus.CounterVec // builds by outcome; nil: none counted
	ctx    context.Context        // ended by stop: reads of chains for an index end
	cancel context.CancelFunc
	builds sync.WaitGroup // the builds under way, waited for by stop

	mu       sync.Mutex
	stopped  bool                   // no build starts any more
	indexes  map[string]*proofIndex // poll → index
	used     []string               // polls, least recently asked first
	asked    map[string]time.Time   // poll → when a proof of it was last asked
	building map[string]*indexBuild // poll → the build under way
	seeds    map[string][][]*ledger.Record
}

// keepFor is how long after its last proof an index is kept against the
// build of another poll's: proofs asked of many polls in turn (a
// scraper's, or an attacker's) get 503 instead of rebuilding one index
// after another.
const keepFor = time.Minute

// ErrProofsBusy is a proof of a poll this node holds no index of, while
// it serves the proofs of keptIndexes other polls.
var ErrProofsBusy = errors.New("certify: serving the proofs of other polls")

// indexBuild is one build of an index that callers wait on.
type indexBuild struct {
	done chan struct{}
	idx  *proofIndex
	err  error
}

func newProofs(now func() time.Time) *proofs {
	ctx, cancel := context.WithCancel(context.Background())
	return &proofs{now: now, ctx: ctx, cancel: cancel, indexes: map[string]*proofIndex{}, asked: map[string]time.Time{}, building: map[string]*indexBuild{},
		seeds: map[string][][]*ledger.Record{}}
}

// seed keeps the chains a poll was certified from, for its index: the
// certifier's first proof reads no replica again.
func (ps *proofs) seed(poll string, chains [][]*ledger.Record) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.seeds[poll] = chains
	for len(ps.seeds) > keptIndexes {
		for p := range ps.seeds {
			if p != poll {
				delete(ps.seeds, p)
				break
			}
		}
	}
}

// index returns the poll's index for its certificate, building it (or
// waiting for the build under way) when it is not kept.
func (ps *proofs) index(ctx context.Context, poll string, cert state.Certificate, head receipt.TreeHead, trustFloor float64, read func(context.Context) ([][]*ledger.Record, error)) (*proofIndex, error) {
	ps.mu.Lock()
	if idx := ps.indexes[poll]; idx != nil && idx.cert == cert.TS {
		ps.mu.Unlock()
		return idx, nil
	}
	if ps.building[poll] == nil && !ps.room(false) {
		busy := slices.Clone(ps.used)
		ps.mu.Unlock()
		return nil, fmt.Errorf("%w: %s (asked within the last %v)", ErrProofsBusy, strings.Join(busy, ", "), keepFor)
	}
	b := ps.start(poll, cert, head, trustFloor, read)
	ps.mu.Unlock()
	select {
	case <-b.done:
		return b.idx, b.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// warm starts building the index of a poll just certified here, from the
// chains it was certified from (seed): the voters' first proofs, asked
// the moment their pages see the certificate, find it built.
func (ps *proofs) warm(poll string, cert state.Certificate, head receipt.TreeHead, trustFloor float64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.room(true)
	ps.start(poll, cert, head, trustFloor, func(context.Context) ([][]*ledger.Record, error) {
		return nil, errors.New("certify: the chains certified are no longer kept")
	})
}

// start returns the build of the poll's index under way, starting one
// when there is none. The caller holds ps.mu.
func (ps *proofs) start(poll string, cert state.Certificate, head receipt.TreeHead, trustFloor float64, read func(context.Context) ([][]*ledger.Record, error)) *indexBuild {
	if b := ps.building[poll]; b != nil {
		return b
	}
	b := &indexBuild{done: make(chan struct{})}
	if ps.stopped {
		b.err = errors.New("certify: stopped")
		close(b.done)
		return b
	}
	ps.building[poll] = b
	chains := ps.seeds[poll]
	ps.builds.Go(func() { // owned by proofs: stop waits for it
		defer close(b.done)
		var err error
		if chains == nil {
			rctx, cancel := context.WithTimeout(ps.ctx, buildTimeout)
			chains, err = read(rctx)
			cancel()
		}
		if err == nil {
			b.idx, b.err = buildIndex(poll, cert, head, trustFloor, chains)
		} else {
			b.err = err
		}
		ps.finish(poll, b)
		if ps.built != nil {
			ps.built.WithLabelValues(map[bool]string{true: "built", false: "failed"}[b.err == nil]).Inc()
		}
	})
	return b
}

// stop ends the reads of the builds under way, waits for them, and
// starts no other (the certifier's Run returns).
func (ps *proofs) stop() {
	ps.mu.Lock()
	ps.stopped = true
	ps.mu.Unlock()
	ps.cancel()
	ps.builds.Wait()
}

// buildTimeout bounds reading a poll's chains for its index.
const buildTimeout = 2 * time.Minute

// finish keeps a build's index (dropping the least recently asked past
// keptIndexes) and ends the build.
func (ps *proofs) finish(poll string, b *indexBuild) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.building, poll)
	if b.err != nil {
		return
	}
	delete(ps.seeds, poll)
	ps.indexes[poll] = b.idx
	ps.asked[poll] = ps.now() // a new index is kept keepFor at least
	ps.touch(poll)
	for len(ps.used) > keptIndexes { // a warm build made room by force: keep the newest
		delete(ps.indexes, ps.used[0])
		delete(ps.asked, ps.used[0])
		ps.used = ps.used[1:]
	}
}

// room makes room for one more index, dropping the least recently asked
// one when keptIndexes are kept or built: only if it was not asked within
// keepFor, unless force. It reports whether there is room. The caller
// holds ps.mu.
func (ps *proofs) room(force bool) bool {
	if len(ps.indexes)+len(ps.building) < keptIndexes {
		return true
	}
	if len(ps.used) == 0 {
		return force
	}
	oldest := ps.used[0]
	if !force && ps.now().Sub(ps.asked[oldest]) < keepFor {
		return false
	}
	delete(ps.indexes, oldest)
	delete(ps.asked, oldest)
	ps.used = ps.used[1:]
	return true
}

// hit notes a proof of poll answered: only a leaf the poll holds keeps
// its index (guessed leaves, 404, keep nothing).
func (ps *proofs) hit(poll string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.indexes[poll] != nil {
		ps.asked[poll] = ps.now()
		ps.touch(poll)
	}
}

// touch marks poll the one whose proof was answered last. The caller
// holds ps.mu.
func (ps *proofs) touch(poll string) {
	ps.used = slices.DeleteFunc(ps.used, func(p string) bool { return p == poll })
	ps.used = append(ps.used, poll)
}

// forget drops what is kept of a poll (its certificate withdrawn).
func (ps *proofs) forget(poll string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.indexes, poll)
	delete(ps.seeds, poll)
	delete(ps.asked, poll)
	ps.used = slices.DeleteFunc(ps.used, func(p string) bool { return p == poll })
}
