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

func BenchmarkIdempotencyLookup(b *testing.B) {
	a := newAcks(10_000_000)
	keys := make([]string, 1_000_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("idem-%d", i)
		a.put("p", keys[i])
	}
	b.Run("hit", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if !a.mayHave("p", keys[i%len(keys)]) {
				b.Fatal("miss")
			}
			i++
		}
	})
	b.Run("miss-parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				a.mayHave("p", "never-seen")
			}
		})
	})
}
