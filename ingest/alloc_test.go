package ingest

import (
	"fmt"
	"testing"
	"time"

	"tally/api"
)

// A relayed batch of decoded votes (as an edge sends them) costs a
// bounded number of allocations per vote at the full node, on an
// in-memory ledger: the records, their answers' strings and the voter
// state's entries (issue 61; BENCHMARKS.md "Edges at the socket floor").
func TestRelayedVoteAllocations(t *testing.T) {
	now := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	p, _ := batchPipeline(t, now)
	const size, runs = 16, 101
	batches := make([][]Request, runs)
	n := 0
	for b := range batches {
		batches[b] = make([]Request, size)
		for i := range batches[b] {
			n++
			batches[b][i] = Request{
				Votes:  []Vote{{Option: "a", Voter: fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", n), Idem: fmt.Sprintf("7c9e6679-7425-40de-944b-%012d", n)}},
				Sender: api.HTTPSender(fmt.Sprintf("192.0.%d.%d", n>>8&255, n&255), "phone", "", 0),
			}
		}
	}
	b := 0
	allocs := testing.AllocsPerRun(runs-1, func() {
		for _, r := range p.VoteBatch("p", batches[b]) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		b++
	})
	perVote := allocs / size
	t.Logf("%.1f allocations per relayed vote", perVote)
	const most = 20 // 17.9 measured on 2026-12-06, the ledger's goroutines included (BenchmarkVoteBatch: 29 a vote before the rate limits' tokens, the hashes and the ip hash's check stopped allocating, 21.7 after, 5 of them the benchmark's own)
	if perVote > most {
		t.Fatalf("%.1f allocations per relayed vote, want at most %d", perVote, most)
	}
}
