package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
)

var (
	// ErrClosed is returned by calls on a closed ledger.
	ErrClosed = errors.New("ledger: closed")
	// ErrBroken is returned after a commit or fsync failed: the ledger
	// refuses further appends rather than retry an fsync whose outcome is
	// unknown.
	ErrBroken = errors.New("ledger: broken by an earlier write error")
	// ErrChain is returned when records do not form a valid hash chain.
	ErrChain = errors.New("ledger: broken chain")
	// ErrConflict is returned when an imported record differs from the one
	// already stored at its (poll, replica, seq).
	ErrConflict = errors.New("ledger: conflicting record")
	// ErrNoReplica is returned by Append on a ledger opened without a replica id.
	ErrNoReplica = errors.New("ledger: no replica id configured")
	// ErrReadOnly is returned by Append and Import on a ledger opened
	// read-only.
	ErrReadOnly = errors.New("ledger: opened read-only")
	// ErrNotExist is returned by a read-only Open of a directory that
	// holds no ledger.
	ErrNotExist = errors.New("ledger: no ledger there")
)

// Config configures a Ledger. Zero values mean the defaults.
type Config struct {
	// Dir is the Pebble directory.
	Dir string
	// FS is the file system; defaults to the OS. Tests pass vfs.NewStrictMem().
	FS vfs.FS
	// Replica is this node's replica id, stamped on appended records.
	// Required for Append, not for reading or importing.
	Replica string
	// MaxBatch caps the records coalesced into one commit. Default 4096.
	MaxBatch int
	// Logger receives Pebble's log lines; defaults to slog.Default().
	Logger *slog.Logger
	// ReadOnly opens an existing ledger for reading only, as auditors'
	// tools do: nothing in the directory is created or changed (Pebble
	// replays the write-ahead log in memory), and a missing ledger is
	// ErrNotExist.
	ReadOnly bool
	// OnCommit, when set, is called after every synced batch with the
	// number of records it wrote and the time from building it to its
	// fsync. It runs on the ledger's goroutine and must be quick.
	OnCommit func(records int, took time.Duration)
	// NoIndex keeps no idempotency index: a store that only imports and
	// is read by chain (a buddy's copies, package buddy) writes each
	// record and its chain's head, and nothing per key.
	NoIndex bool
	// Copier, when set, holds every appended batch until its records are
	// on a second machine as well (copy.go); Append then returns
	// ErrNotCopied where they are not.
	Copier Copier
}

// Stats are counters since Open.
type Stats struct {
	Appended   uint64 // records appended by Append
	Duplicates uint64 // Append records answered from the idempotency index
	Imported   uint64 // records written by Import
	Commits    uint64 // synced batches
	WALSyncs   uint64 // fsyncs of the write-ahead log seen at the file system
}

// Ledger is an open vote ledger. It is safe for concurrent use.
type Ledger struct {
	db       *pebble.DB
	fs       *countingFS
	replica  string
	maxBatch int
	onCommit func(int, time.Duration)

	// sendMu orders Append's send on queue against Close's close(queue).
	sendMu     sync.RWMutex
	closed     bool
	readOnly   bool         // set by Open, never changed: no commit pipeline
	noIndex    bool         // Config.NoIndex
	metaMu     sync.RWMutex // see metaOpen
	metaClosed bool
	roClosed   bool // a read-only ledger's Close ran
	queue      chan *request
	staged     chan *commit // built batches, to the applier
	inflight   chan *commit // applied batches, to the syncer
	copying    chan *commit // synced batches, to the copier (with a Copier)
	wg         sync.WaitGroup

	mu       sync.Mutex
	unsynced []*commit // built commits not yet fsynced, oldest first
	broken   error

	// heads and filter are owned by the committer goroutine after Open.
	heads  map[chainID]head
	filter *idemFilter

	copies *copyStage // with a Copier; nil without
	n      counters
}

// chainID names one hash chain.
type chainID struct{ poll, replica string }

// Open opens (creating if needed) the ledger in cfg.Dir and starts its
// commit pipeline.
func Open(cfg Config) (*Ledger, error) {
	if cfg.Replica != "" {
		if err := ValidID(cfg.Replica); err != nil {
			return nil, fmt.Errorf("%w: replica %w", ErrInvalid, err)
		}
	}
	if cfg.FS == nil {
		cfg.FS = vfs.Default
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReadOnly {
		if _, err := cfg.FS.Stat(cfg.FS.PathJoin(cfg.Dir, "CURRENT")); err != nil {
			return nil, fmt.Errorf("%w: %s holds no ledger (%v)", ErrNotExist, cfg.Dir, err)
		}
	} else if err := makeDirDurable(cfg.FS, cfg.Dir); err != nil {
		return nil, fmt.Errorf("ledger: cannot create %s: %w", cfg.Dir, err)
	}
	if err := checkWAL(cfg.FS, cfg.Dir); err != nil {
		return nil, err
	}
	cfs := &countingFS{FS: cfg.FS}
	opts := &pebble.Options{
		FS:     cfs,
		Logger: pebbleLogger{cfg.Logger},
		// 16 MiB memtables: a million ledgered votes hold ~54 MB outside
		// the Go heap (64 MiB ones held ~150 MB, 100 bytes a voter) at the
		// same vote rate and certification time (BENCHMARKS.md).
		MemTableSize: 16 << 20,
		ReadOnly:     cfg.ReadOnly,
	}

	db, err := openPebble(cfg.Dir, opts)
	if err != nil {
		return nil, err
	}
	l := &Ledger{
		db:       db,
		fs:       cfs,
		replica:  cfg.Replica,
		maxBatch: cfg.MaxBatch,
		noIndex:  cfg.NoIndex,
		onCommit: cfg.OnCommit,
		queue:    make(chan *request, 1024),
		staged:   make(chan *commit, 1),
		inflight: make(chan *commit, 4),
		heads:    make(map[chainID]head),
		filter:   newIdemFilter(),
	}
	if err := l.loadHeads(); err != nil {
		db.Close()
		return nil, err
	}
	if err := l.filter.load(db); err != nil {
		db.Close()
		return nil, err
	}
	if cfg.ReadOnly {
		l.readOnly, l.closed = true, true // Append and Import answer ErrReadOnly
		return l, nil
	}
	if cfg.Copier != nil {
		l.copies = &copyStage{copier: cfg.Copier, marks: make(map[chainID]uint64)}
		l.copying = make(chan *commit, maxCopyGroup) // what queues while a copy is in flight goes in the next
		l.wg.Add(1)
		go l.copies.run(l)
	}
	l.wg.Add(3)
	go l.commitLoop()
	go l.applyLoop()
	go l.syncLoop()
	return l, nil
}

// Close finishes the appends already queued, waits for their fsync, and
// closes Pebble. It is safe to call more than once.
func (l *Ledger) Close() error {
	if l.readOnly {
		l.sendMu.Lock()
		done := l.roClosed
		l.roClosed = true
		l.sendMu.Unlock()
		if done {
			return nil
		}
		return l.closeDB()
	}
	l.sendMu.Lock()
	if l.closed {
		l.sendMu.Unlock()
		return nil
	}
	l.closed = true
	close(l.queue)
	l.sendMu.Unlock()
	l.wg.Wait()
	return l.closeDB()
}

// Replica returns the replica id this ledger stamps on appended records.
func (l *Ledger) Replica() string { return l.replica }

// Stats returns counters since Open.
func (l *Ledger) Stats() Stats {
	return Stats{
		Appended:   l.n.appended.Load(),
		Duplicates: l.n.duplicates.Load(),
		Imported:   l.n.imported.Load(),
		Commits:    l.n.commits.Load(),
		WALSyncs:   l.fs.walSyncs.Load(),
	}
}

func (l *Ledger) loadHeads() error {
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixHead}, UpperBound: []byte{prefixHead + 1}})
	if err != nil {
		return fmt.Errorf("ledger: cannot read chain heads: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()[1:]
		i := bytes.IndexByte(k, 0)
		if i < 0 {
			return fmt.Errorf("%w: chain head key %q", ErrMalformed, it.Key())
		}
		h, err := decodeHead(it.Value())
		if err != nil {
			return err
		}
		l.heads[chainID{poll: string(k[:i]), replica: string(k[i+1:])}] = h
	}
	return it.Error()
}

// Head returns the number of records and the hash of the last record of
// the replica's chain for poll.
func (l *Ledger) Head(poll, replica string) (count uint64, last Hash, err error) {
	v, closer, err := l.db.Get(headKey(poll, replica))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, Hash{}, nil
	}
	if err != nil {
		return 0, Hash{}, fmt.Errorf("ledger: cannot read chain head: %w", err)
	}
	defer closer.Close()
	h, err := decodeHead(v)
	return h.seq, h.hash, err
}

// Lookup tells whether (poll, idem) was appended, and the vote id it got.
// It reports only durable entries: for a key whose commit is still waiting
// for its fsync, Lookup waits for it.
func (l *Ledger) Lookup(poll, idem string) (VoteID, bool, error) {
	k := idemKey(nil, poll, idem)
	v, closer, err := l.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return VoteID{}, false, nil
	}
	if err != nil {
		return VoteID{}, false, fmt.Errorf("ledger: cannot look up idempotency key: %w", err)
	}
	id, err := decodeVoteID(v)
	closer.Close()
	if err != nil {
		return VoteID{}, false, err
	}
	if c, _ := l.unsyncedWith(k); c != nil {
		<-c.synced
		if c.err != nil {
			return VoteID{}, false, c.err
		}
	}
	return id, true, nil
}

// Scan yields one poll's records in (replica, seq) order.
func (l *Ledger) Scan(poll string) iter.Seq2[Record, error] {
	p := pollRecordPrefix(poll)
	return l.scan(p, prefixEnd(p))
}

// ScanAfter yields replica's records of one poll whose seq is above after,
// in seq order: the tail of a chain someone already holds up to after.
func (l *Ledger) ScanAfter(poll, replica string, after uint64) iter.Seq2[Record, error] {
	if after == math.MaxUint64 {
		return func(func(Record, error) bool) {}
	}
	return l.scan(recordKey(nil, poll, replica, after+1), recordKey(nil, poll, replica, math.MaxUint64))
}

// Replay yields every record in the ledger, poll by poll, each replica's
// chain in sequence order. A node rebuilds its state from it at start-up.
func (l *Ledger) Replay() iter.Seq2[Record, error] {
	return l.scan([]byte{prefixRecord}, []byte{prefixRecord + 1})
}

// ReplayAfter yields replica's records of every poll whose seq is above
// after[poll] (all of them for a poll not in after): the tail a restart
// replays on top of a checkpoint.
func (l *Ledger) ReplayAfter(replica string, after map[string]uint64) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		polls, err := l.Polls()
		if err != nil {
			yield(Record{}, err)
			return
		}
		for _, poll := range polls {
			lower := recordKey(nil, poll, replica, after[poll]+1)
			upper := recordKey(nil, poll, replica, math.MaxUint64)
			for r, err := range l.scan(lower, upper) {
				if !yield(r, err) || err != nil {
					return
				}
			}
		}
	}
}

func (l *Ledger) scan(lower, upper []byte) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			yield(Record{}, fmt.Errorf("ledger: cannot scan: %w", err))
			return
		}
		defer it.Close()
		var in interner
		for it.First(); it.Valid(); it.Next() {
			r, err := DecodeRecord(it.Value())
			if err != nil {
				yield(Record{}, fmt.Errorf("ledger: record at key %q: %w", it.Key(), err))
				return
			}
			r.Poll, r.Replica = in.get(r.Poll), in.get(r.Replica)
			if !yield(r, nil) {
				return
			}
		}
		if err := it.Error(); err != nil {
			yield(Record{}, fmt.Errorf("ledger: cannot scan: %w", err))
		}
	}
}

// Polls returns the ids of the polls that have records, sorted.
func (l *Ledger) Polls() ([]string, error) {
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixHead}, UpperBound: []byte{prefixHead + 1}})
	if err != nil {
		return nil, fmt.Errorf("ledger: cannot list polls: %w", err)
	}
	defer it.Close()
	var polls []string
	for it.First(); it.Valid(); it.Next() {
		if k := it.Key()[1:]; bytes.IndexByte(k, 0) >= 0 {
			polls = append(polls, string(k[:bytes.IndexByte(k, 0)]))
		}
	}
	return uniqueSorted(polls), it.Error()
}

// PutMeta durably stores a small value under name, for callers' own
// durable state (poll definitions, ids).
func (l *Ledger) PutMeta(name string, value []byte) error {
	release, err := l.metaOpen()
	if err != nil {
		return err
	}
	defer release()
	if err := l.db.Set(append([]byte{prefixMeta}, name...), value, pebble.Sync); err != nil {
		return fmt.Errorf("ledger: cannot store %s: %w", name, err)
	}
	return nil
}

// PutMetaBatch stores names[i] = values[i] in one batch. With sync false
// the batch is in the write-ahead log but not fsynced: it survives the
// process being killed, not the machine losing power — for state that is
// cheap to lose a little of and costly to fsync often (the token budget).
func (l *Ledger) PutMetaBatch(names []string, values [][]byte, sync bool) error {
	if len(names) != len(values) {
		return fmt.Errorf("ledger: %d names for %d values", len(names), len(values))
	}
	release, err := l.metaOpen()
	if err != nil {
		return err
	}
	defer release()
	b := l.db.NewBatch()
	defer b.Close()
	for i, name := range names {
		if err := b.Set(append([]byte{prefixMeta}, name...), values[i], nil); err != nil {
			return fmt.Errorf("ledger: cannot store %s: %w", name, err)
		}
	}
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
	}
	if err := b.Commit(opts); err != nil {
		return fmt.Errorf("ledger: cannot store %d values: %w", len(names), err)
	}
	return nil
}

// DeleteMetaRange removes every value whose name is in [from, to), not
// fsynced (see PutMetaBatch).
func (l *Ledger) DeleteMetaRange(from, to string) error {
	release, err := l.metaOpen()
	if err != nil {
		return err
	}
	defer release()
	if err := l.db.DeleteRange(append([]byte{prefixMeta}, from...), append([]byte{prefixMeta}, to...), pebble.NoSync); err != nil {
		return fmt.Errorf("ledger: cannot delete %s…%s: %w", from, to, err)
	}
	return nil
}

// Meta returns the value stored under name.
func (l *Ledger) Meta(name string) ([]byte, bool, error) {
	release, err := l.metaOpen()
	if err != nil {
		return nil, false, err
	}
	defer release()
	v, closer, err := l.db.Get(append([]byte{prefixMeta}, name...))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("ledger: cannot read %s: %w", name, err)
	}
	defer closer.Close()
	return append([]byte(nil), v...), true, nil
}

// MetaWithPrefix yields every (name, value) whose name starts with prefix.
func (l *Ledger) MetaWithPrefix(prefix string) iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		release, err := l.metaOpen()
		if err != nil {
			return
		}
		defer release()
		lower := append([]byte{prefixMeta}, prefix...)
		it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
		if err != nil {
			return
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			if !yield(string(it.Key()[1:]), append([]byte(nil), it.Value()...)) {
				return
			}
		}
	}
}

// metaOpen guards the metadata calls, which gossip and the certifier make
// from goroutines of their own (memberlist does not wait for its stream
// handlers), against a Pebble that Close has closed: Pebble panics there.
// The caller runs release when done.
func (l *Ledger) metaOpen() (release func(), err error) {
	l.metaMu.RLock()
	if l.metaClosed {
		l.metaMu.RUnlock()
		return nil, ErrClosed
	}
	return l.metaMu.RUnlock, nil
}

// closeDB closes Pebble once no metadata call is in flight.
func (l *Ledger) closeDB() error {
	l.metaMu.Lock()
	l.metaClosed = true
	l.metaMu.Unlock()
	return l.db.Close()
}
