package node

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"tally/internal/testwait"
	"tally/ledger"
)

// BenchmarkCertifyMillionVotes: 1,000,000 votes ledgered across three
// regions (333,334 / 333,333 / 333,333, appended straight into each node's
// ledger in synced batches, their record counts spread by gossip), then the
// poll closes: the time from close + grace to the certified result served
// by every region (the settle, 250 ms by default, runs on the process's
// own clock and is included). The
// coordinator fetches the two other replicas' records over HTTP (binary stream)
// and reconciles all three with its own, on the same two cores that serve
// the exports. With prefetch (the default) every node has copied the three
// chains while the poll ran, and the close reads only what is new; without
// (--certify-prefetch 0) the two other chains are read whole at close.
// Both include --certify-settle. It prints seconds; nothing is asserted
// about time. Run with ./bench/certify.sh.
func BenchmarkCertifyMillionVotes(b *testing.B) {
	for _, prefetch := range []int{DefaultConfig().CertifyPrefetch, 0} {
		name := "prefetch"
		if prefetch == 0 {
			name = "no-prefetch"
		}
		b.Run(name, func(b *testing.B) { benchmarkCertify(b, prefetch) })
	}
}

func benchmarkCertify(b *testing.B, prefetch int) {
	const votes = 1_000_000
	for range b.N {
		nodes := startCluster(b, []string{"eu-west", "us-east", "ap-south"}, func(_ int, c *Config) { c.CertifyPrefetch = prefetch })
		nodes[0].createPoll(b, "p") // 60 s, grace 5 s
		havePoll(b, nodes, "p")
		def, _ := nodes[0].state.Defs.Poll("p")
		var wg sync.WaitGroup
		for i, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				share := votes / 3
				if i == 0 {
					share += votes % 3
				}
				rng := rand.New(rand.NewPCG(uint64(i), 7))
				batch := make([]ledger.Record, 0, 5000)
				flush := func() {
					if _, err := n.ledger.Append(batch...); err != nil {
						b.Error(err)
					}
					n.state.AddRecords("p", uint64(len(batch)))
					batch = batch[:0]
				}
				for k := range share {
					voter := fmt.Sprintf("%s-v%d", n.cfg.Region, k)
					batch = append(batch, ledger.Record{Poll: "p", Voter: voter, Option: []string{"a", "b", "c"}[rng.IntN(3)],
						Idem: voter, Wall: def.OpensAt + 1 + int64(k%50000), Trust: 1, Counted: true,
						Signals: &ledger.Signals{SincePrevMs: 0, IPVotesPerMin: 12, IPVoters: 3, TokenAgeMs: 8000, SocketAgeMs: -1}})
					if len(batch) == cap(batch) {
						flush()
					}
				}
				if len(batch) > 0 {
					flush()
				}
			}()
		}
		wg.Wait()
		waitFor(b, func() bool { // every region knows every replica's count
			for _, n := range nodes {
				t, _ := n.state.Tally("p")
				var sum uint64
				for _, c := range t.RecordCounts() {
					sum += c
				}
				if sum != votes {
					return false
				}
			}
			return true
		})
		var copied time.Duration
		if prefetch > 0 {
			// While a poll runs, every full node copies every chain of it
			// (its own included) as the counts arrive: the poll would run
			// on while it does, so the close waits for it here.
			start := time.Now()
			testwait.For(b, 5*time.Minute, "every node's copies of the three chains", func() bool {
				return metricValue(b, nodes, "tally_certify_prefetched_records", "") == float64(len(nodes)*votes)
			})
			copied = time.Since(start)
		}
		b.ResetTimer()
		advanceAll(nodes, 67*time.Second) // past close (60 s), grace (5 s) and the settle
		start := time.Now()
		var first time.Duration
		deadline := time.Now().Add(5 * time.Minute)
		for {
			done := 0
			for _, n := range nodes {
				if c, ok := n.state.Defs.Certificate("p"); ok && c.Status == "reconciled" {
					done++
				}
			}
			if done > 0 && first == 0 {
				first = time.Since(start)
			}
			if done == len(nodes) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("not certified within 5 minutes")
			}
			time.Sleep(5 * time.Millisecond)
		}
		all := time.Since(start)
		b.StopTimer()
		c, _ := nodes[0].state.Defs.Certificate("p")
		if c.Total != votes {
			b.Fatalf("certified total %d, want %d", c.Total, votes)
		}
		if copied > 0 {
			b.ReportMetric(copied.Seconds(), "s-copied-after-counts")
		}
		b.ReportMetric(first.Seconds(), "s-first-region")
		// How the certificate was merged, and the attempts it took.
		b.ReportMetric(metricValue(b, nodes, "tally_certify_merges_total", `how="incremental"`), "incremental-merges")
		b.ReportMetric(metricValue(b, nodes, "tally_certify_attempts_total", ""), "attempts")
		b.ReportMetric(all.Seconds(), "s-every-region")
	}
}
