package ledger

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// TestCrashKeepsEveryAckedAppend crashes the ledger at random points: the
// strict in-memory FS drops everything not fsynced, as a power cut would.
// After each crash, every Append that returned nil must be present, no call
// may be partly visible, chains must verify, and the idempotency index
// must agree with the records. Writers continue on the recovered ledger,
// so later crashes also test chains that span restarts.
func TestCrashKeepsEveryAckedAppend(t *testing.T) {
	const filesystems, crashesEach = 40, 5 // 200 crash points
	for f := range filesystems {
		t.Run(fmt.Sprint(f), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(f), 42))
			fs := vfs.NewStrictMem()
			var calls [][]string // the keys of every call that was acked before a crash
			next := 0
			for crash := range crashesEach {
				l, err := Open(Config{Dir: "db", FS: fs, Replica: "eu-1", MaxBatch: 1 + rng.IntN(64)})
				if err != nil {
					t.Fatalf("crash %d: reopen: %v", crash, err)
				}
				checkRecovered(t, l, calls)

				var mu sync.Mutex
				crashed := false
				var wg sync.WaitGroup
				writers := 1 + rng.IntN(16)
				budget := 1 + rng.IntN(200)
				stop := make(chan struct{})
				for w := range writers {
					wg.Add(1)
					base := next + w*10_000
					go func() {
						defer wg.Done()
						for i := 0; ; i++ {
							select {
							case <-stop:
								return
							default:
							}
							n := 1 + (base+i)%3 // calls of 1–3 records
							recs := make([]Record, n)
							keys := make([]string, n)
							for j := range n {
								keys[j] = fmt.Sprintf("k%d-%d-%d", base, i, j)
								recs[j] = vote("p", keys[j], "o", keys[j], int64(1+i))
							}
							_, err := l.Append(recs...)
							mu.Lock()
							if err == nil && !crashed {
								calls = append(calls, keys)
							}
							mu.Unlock()
							if err != nil {
								return
							}
						}
					}()
				}
				// Let some appends land, then cut the power mid-flight.
				for {
					mu.Lock()
					n := len(calls)
					mu.Unlock()
					if n >= budget {
						break
					}
					runtimeGosched()
				}
				mu.Lock()
				crashed = true
				fs.SetIgnoreSyncs(true)
				mu.Unlock()
				close(stop)
				wg.Wait()
				l.Close()
				fs.ResetToSyncedState()
				fs.SetIgnoreSyncs(false)
				next += writers * 10_000
			}
			l, err := Open(Config{Dir: "db", FS: fs, Replica: "eu-1"})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			checkRecovered(t, l, calls)
		})
	}
}

// checkRecovered asserts the crash invariants on a reopened ledger.
func checkRecovered(t *testing.T, l *Ledger, acked [][]string) {
	t.Helper()
	recs := collect(t, l.Scan("p"))
	present := make(map[string]bool, len(recs))
	for _, r := range recs {
		present[r.Idem] = true
	}
	for _, keys := range acked {
		for _, k := range keys {
			if !present[k] {
				t.Fatalf("acked record %s lost (%d records present)", k, len(recs))
			}
		}
	}
	// No partial call: the keys of one call share a prefix up to the last
	// dash; all or none of a call's keys are present.
	calls := map[string][2]int{}
	for _, r := range recs {
		p := r.Idem[:lastDash(r.Idem)]
		c := calls[p]
		c[0]++
		calls[p] = c
	}
	for p, c := range calls {
		var base, i int
		fmt.Sscanf(p, "k%d-%d", &base, &i)
		if want := 1 + (base+i)%3; c[0] != want {
			t.Fatalf("call %s is partly visible: %d of %d records", p, c[0], want)
		}
	}
	if len(recs) > 0 {
		if _, err := VerifyChains(l.Scan("p")); err != nil {
			t.Fatal(err)
		}
	}
	assertIndexAgrees(t, l, "p")
}

func lastDash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '-' {
			return i
		}
	}
	return len(s)
}
