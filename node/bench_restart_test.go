package node

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"tally/ledger"
)

// BenchmarkRestartMillionRecords: a node whose ledger holds 1,000,000
// votes of 1,000,000 voters restarts, first without a checkpoint (the whole
// ledger is replayed), then from the checkpoint its graceful stop wrote
// (nothing left to replay). It prints the seconds from start to ready
// (ledger open, restore, gossip start) and the restore alone; nothing is
// asserted about time. Run with ./bench/certify.sh.
func BenchmarkRestartMillionRecords(b *testing.B) {
	const votes = 1_000_000
	dir := b.TempDir()
	tn := startNode(b, dir, nil)
	tn.createPoll(b, "p")
	def, _ := tn.state.Defs.Poll("p")
	batch := make([]ledger.Record, 0, 5000)
	for k := range votes {
		voter := fmt.Sprintf("voter-%d", k)
		batch = append(batch, ledger.Record{Poll: "p", Voter: voter, Option: []string{"a", "b", "c"}[k%3], Idem: voter,
			Wall: def.OpensAt + 1 + int64(k%50000), Trust: 1, Counted: true,
			Signals: &ledger.Signals{SincePrevMs: 0, IPVotesPerMin: 12, IPVoters: 3, TokenAgeMs: 8000, SocketAgeMs: -1}})
		if len(batch) == cap(batch) || k == votes-1 {
			if _, err := tn.ledger.Append(batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	// Count them as the vote path would have, so the stop's checkpoint is whole.
	if _, err := tn.ingest.Replay(tn.ledger.Replay(), tn.replica); err != nil {
		b.Fatal(err)
	}
	if err := tn.stop(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		for _, withCheckpoint := range []bool{false, true} {
			if !withCheckpoint {
				os.Remove(filepath.Join(dir, checkpointFile))
			}
			start := time.Now()
			tn := startNode(b, dir, nil)
			ready := time.Since(start)
			if got := tn.totals(b, "p")["_total"]; got != votes {
				b.Fatalf("after restart: total %d", got)
			}
			name := map[bool]string{false: "full-replay", true: "checkpoint"}[withCheckpoint]
			b.ReportMetric(ready.Seconds(), "s-ready-"+name)
			b.ReportMetric(readGauge(b, tn, "tally_replay_seconds"), "s-restore-"+name)
			if err := tn.stop(); err != nil { // writes the checkpoint the next round loads
				b.Fatal(err)
			}
		}
	}
}

// readGauge reads one of the node's gauges from its registry.
func readGauge(tb testing.TB, tn *testNode, name string) float64 {
	mfs, err := tn.reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	tb.Fatalf("no gauge %s", name)
	return 0
}
