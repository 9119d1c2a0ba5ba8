package ingest

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"tally/api"
)

// Benchmarks of the vote path's hot functions. Run:
//
//	go test ./ingest ./state -run '^$' -bench . -benchmem

func BenchmarkDecodeVotes(b *testing.B) {
	single := []byte(`{"option":"red","voter":"0f8fad5b-d9cb-469f-a165-70867728950e","idem":"7c9e6679-7425-40de-944b-e07fc1f90ae7"}`)
	batch := []byte(`{"votes":[`)
	for i := range 10 {
		if i > 0 {
			batch = append(batch, ',')
		}
		batch = fmt.Appendf(batch, `{"option":"red","voter":"0f8fad5b-d9cb-469f-a165-70867728950e","idem":"7c9e6679-7425-40de-944b-e07fc1f9%04d"}`, i)
	}
	batch = append(batch, "]}"...)
	for name, body := range map[string][]byte{"single": single, "batch10": batch} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := DecodeVotes(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVoteBatch is a full node's side of the relay without the
// network: batches of 64 single-vote requests, each a new voter and key,
// as an edge relays them decoded (votes) or as their bodies (body), on an
// in-memory ledger (no fsync), and decoded with each answer's receipt
// signed (receipts), as a node does. Per op: one batch; see ns/vote.
func BenchmarkVoteBatch(b *testing.B) {
	for _, name := range []string{"votes", "body", "receipts"} {
		decoded := name != "body"
		b.Run(name, func(b *testing.B) {
			now := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
			p, _ := batchPipeline(b, now)
			if name == "receipts" {
				_, key, _ := ed25519.GenerateKey(nil)
				p.cfg.SignReceipt = func(m []byte) []byte { return ed25519.Sign(key, m) }
			}
			const size = 64
			reqs := make([]Request, size)
			n := 0
			for b.Loop() {
				for i := range reqs {
					n++
					v := Vote{Option: "a", Voter: fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", n), Idem: fmt.Sprintf("7c9e6679-7425-40de-944b-%012d", n)}
					reqs[i] = Request{Sender: api.HTTPSender(fmt.Sprintf("192.0.%d.%d", n>>8&255, n&255), "phone", "", 0)}
					if decoded {
						reqs[i].Votes = []Vote{v}
					} else {
						reqs[i].Body, _ = json.Marshal(v)
					}
				}
				for _, r := range p.VoteBatch("p", reqs) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/vote")
		})
	}
}
