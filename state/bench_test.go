package state

import (
	"testing"

	"tally/hlc"
)

// BenchmarkCount is the counter increment of every counted vote, from all
// cores at once into one poll (the striped cells exist for this).
func BenchmarkCount(b *testing.B) {
	s, _ := New(Config{Replica: "eu-1"})
	s.PutPoll(def("p"), hlc.Timestamp{Wall: 1, Replica: "eu-1"})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Count("p", "red", 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTotals is the read a fan-out tick or a GET does.
func BenchmarkTotals(b *testing.B) {
	s, _ := New(Config{Replica: "eu-1"})
	s.PutPoll(def("p"), hlc.Timestamp{Wall: 1, Replica: "eu-1"})
	for b.Loop() {
		if _, _, err := s.Totals("p"); err != nil {
			b.Fatal(err)
		}
	}
}
