package ingest

import (
	"fmt"
	"testing"
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
