package ledger

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
)

// Benchmarks for BENCHMARKS.md. Run:
//
//	go test ./ledger -run '^$' -bench . -benchtime 100000x
//
// They use the real disk (b.TempDir) and report records/s, append latency
// percentiles, and how many records shared one WAL fsync.

// appender is the part of a ledger the append benchmark drives.
type appender interface {
	append(r Record) error
	walSyncs() uint64
	commits() uint64
	close()
}

type queued struct{ l *Ledger }

func (q queued) append(r Record) error { _, err := q.l.Append(r); return err }
func (q queued) walSyncs() uint64      { return q.l.Stats().WALSyncs }
func (q queued) commits() uint64       { return q.l.Stats().Commits }
func (q queued) close()                { q.l.Close() }

// direct is the alternative design: no commit queue of our own. Each
// caller builds its own batch under a mutex (the chain needs one order) and
// relies on Pebble's WAL group commit to share fsyncs between callers.
type direct struct {
	db      *pebble.DB
	fs      *countingFS
	mu      sync.Mutex
	heads   map[chainID]head
	batches atomic.Uint64
}

func openDirect(b *testing.B) *direct {
	fs := &countingFS{FS: vfs.Default}
	db, err := pebble.Open(b.TempDir(), &pebble.Options{FS: fs, MemTableSize: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	return &direct{db: db, fs: fs, heads: map[chainID]head{}}
}

func (d *direct) append(r Record) error {
	batch := d.db.NewBatch()
	defer batch.Close()
	d.mu.Lock()
	ik := idemKey(nil, r.Poll, r.Idem)
	if _, closer, err := d.db.Get(ik); err == nil {
		closer.Close()
		d.mu.Unlock()
		return nil
	} else if !errors.Is(err, pebble.ErrNotFound) {
		d.mu.Unlock()
		return err
	}
	chain := chainID{r.Poll, "eu-1"}
	h := d.heads[chain]
	r.Replica, r.Seq, r.Prev = "eu-1", h.seq+1, h.hash
	enc := r.AppendBinary(nil)
	d.heads[chain] = head{seq: r.Seq, hash: sha256.Sum256(enc)}
	batch.Set(recordKey(nil, r.Poll, r.Replica, r.Seq), enc, nil)
	batch.Set(ik, encodeVoteID(nil, r.ID()), nil)
	batch.Set(headKey(r.Poll, r.Replica), d.heads[chain].encode(), nil)
	err := d.db.ApplyNoSyncWait(batch, pebble.Sync)
	d.mu.Unlock()
	d.batches.Add(1)
	if err != nil {
		return err
	}
	return batch.SyncWait()
}
func (d *direct) walSyncs() uint64 { return d.fs.walSyncs.Load() }
func (d *direct) commits() uint64  { return d.batches.Load() }
func (d *direct) close()           { d.db.Close() }

// rawSet is the floor of the comparison: one Pebble Set with Sync per
// record, no chain, no idempotency index, no lock — Pebble's group commit
// alone, doing less work than a ledger append.
type rawSet struct{ d *direct }

func (r rawSet) append(rec Record) error {
	rec.Replica, rec.Seq = "eu-1", 1
	return r.d.db.Set(idemKey(nil, rec.Poll, rec.Idem), rec.AppendBinary(nil), pebble.Sync)
}
func (r rawSet) walSyncs() uint64 { return r.d.walSyncs() }
func (r rawSet) commits() uint64  { return 0 }
func (r rawSet) close()           { r.d.close() }

func BenchmarkAppend(b *testing.B) {
	designs := []struct {
		name string
		open func(b *testing.B) appender
	}{
		{"queue", func(b *testing.B) appender {
			l, err := Open(Config{Dir: b.TempDir(), Replica: "eu-1"})
			if err != nil {
				b.Fatal(err)
			}
			return queued{l}
		}},
		{"pebble-group-commit", func(b *testing.B) appender { return openDirect(b) }},
		{"raw-pebble-set-sync", func(b *testing.B) appender { return rawSet{openDirect(b)} }},
	}
	for _, writers := range []int{1, 64, 256} {
		for _, d := range designs {
			b.Run(fmt.Sprintf("writers=%d/design=%s", writers, d.name), func(b *testing.B) {
				a := d.open(b)
				defer a.close()
				lat := make([][]time.Duration, writers)
				var wg sync.WaitGroup
				per := max(b.N/writers, 1)
				b.ResetTimer()
				start := time.Now()
				for w := range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						lat[w] = make([]time.Duration, 0, per)
						for i := range per {
							k := fmt.Sprintf("w%d-%d", w, i)
							t0 := time.Now()
							if err := a.append(vote("p", k, "red", k, int64(1+i))); err != nil {
								b.Error(err)
								return
							}
							lat[w] = append(lat[w], time.Since(t0))
						}
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				all := slices.Concat(lat...)
				slices.Sort(all)
				n := len(all)
				b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
				b.ReportMetric(float64(all[n/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(all[n*99/100].Microseconds()), "p99-µs")
				b.ReportMetric(float64(n)/float64(max(a.walSyncs(), 1)), "records/fsync")
				b.ReportMetric(float64(n)/float64(max(a.commits(), 1)), "records/batch")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// syntheticHistory returns n chained records spread over replicas, with
// voters changing their minds (about a third of records supersede another)
// and 1% retries reaching a second replica.
func syntheticHistory(n int, replicas []string) [][]Record {
	ch := chainer{}
	out := make([][]Record, len(replicas))
	options := []string{"red", "green", "blue", "yellow"}
	for i := range n {
		ri := i % len(replicas)
		k := fmt.Sprintf("k%d", i)
		if i%100 == 99 {
			k = fmt.Sprintf("k%d", i-1) // a retry of the previous vote, at another replica
		}
		r := vote("p", fmt.Sprintf("v%d", i*2/3), options[i%len(options)], k, int64(1_700_000_000_000+i))
		r.Replica = replicas[ri]
		out[ri] = append(out[ri], ch.add(r))
	}
	return out
}

func BenchmarkReconcile(b *testing.B) {
	const n = 1_000_000
	hist := syntheticHistory(n, []string{"ap-1", "eu-1", "us-1"})
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		streams := make([]iter.Seq2[Record, error], len(hist))
		for i, h := range hist {
			streams[i] = RecordsOf(h)
		}
		res, err := Reconcile(streams...)
		if err != nil || res.Records != n {
			b.Fatal(res, err)
		}
	}
	b.ReportMetric(float64(b.N*n)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkReconcileChains: the same million records already in memory
// with their hashes kept, as a certifier's copies are at close.
func BenchmarkReconcileChains(b *testing.B) {
	const n = 1_000_000
	hist := syntheticHistory(n, []string{"ap-1", "eu-1", "us-1"})
	chains := make([][]*Record, len(hist))
	for i, h := range hist {
		for k := range h {
			h[k].KeepHash()
			chains[i] = append(chains[i], &h[k])
		}
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		res, err := ReconcileChains(ReconcileConfig{}, chains...)
		if err != nil || res.Records != n {
			b.Fatal(res, err)
		}
	}
	b.ReportMetric(float64(b.N*n)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkMerge: the same million records merged as a certifier's copies
// grow while the poll runs (add: per record, in the background), and the
// result asked of it at close (result: the whole of the work left then),
// beside BenchmarkReconcileChains over the same records.
func BenchmarkMerge(b *testing.B) {
	const n = 1_000_000
	hist := syntheticHistory(n, []string{"ap-1", "eu-1", "us-1"})
	for _, h := range hist {
		for k := range h {
			h[k].KeepHash()
		}
	}
	build := func() *Merge {
		m := NewMerge("p")
		for k := range hist[0] { // the chains interleaved, as top-ups arrive
			for _, h := range hist {
				if k < len(h) {
					if err := m.Add(&h[k]); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		return m
	}
	b.Run("add", func(b *testing.B) {
		start := time.Now()
		for range b.N {
			build()
		}
		b.ReportMetric(float64(b.N*n)/time.Since(start).Seconds(), "records/s")
		// The merge's own heap, the records aside (they are the copies').
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		m := build()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/record")
		runtime.KeepAlive(m)
	})
	b.Run("result", func(b *testing.B) {
		m := build()
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			res, err := m.Result(ReconcileConfig{Poll: "p"})
			if err != nil || res.Records != n {
				b.Fatal(res, err)
			}
		}
		b.ReportMetric(float64(b.N*n)/time.Since(start).Seconds(), "records/s")
	})
}

func BenchmarkReplay(b *testing.B) {
	const n = 1_000_000
	l, err := Open(Config{Dir: b.TempDir(), Replica: "eu-1"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := make([]Record, 0, 1000)
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		batch = append(batch, vote(fmt.Sprintf("poll-%d", i%4), k, "red", k, int64(1+i)))
		if len(batch) == cap(batch) {
			if _, err := l.Append(batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		count := 0
		for _, err := range l.Replay() {
			if err != nil {
				b.Fatal(err)
			}
			count++
		}
		if count != n {
			b.Fatalf("replayed %d", count)
		}
	}
	b.ReportMetric(float64(b.N*n)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkDecodeRecord: one record's canonical bytes decoded and
// validated, as the chain check and the replay do for every record.
func BenchmarkDecodeRecord(b *testing.B) {
	r := Record{Poll: "final", Replica: "eu-west-3f9c2a10", Seq: 123456, Wall: 1764500000000, Logical: 3, Voter: "viewer-8a7f2c",
		Option: "a", Idem: "k-9d8e7f6a5b4c", Trust: 0.9, Counted: true, IPHash: "0123456789abcdef0123456789abcdef",
		Signals: &Signals{SincePrevMs: -1, IPVotesPerMin: 3, IPVoters: 2, TokenAgeMs: 40000, SocketAgeMs: 12000}}
	enc := r.AppendBinary(nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRecord(enc); err != nil {
			b.Fatal(err)
		}
	}
}
