package state

import (
	"fmt"
	"testing"

	"tally/hlc"
)

// BenchmarkCount is the counter increment of every counted vote, from all
// cores at once into one poll (the striped cells exist for this).
func BenchmarkCount(b *testing.B) {
	s, _ := New(Config{Replica: "eu-1"})
	s.Defs.PutPoll(def("p"), hlc.Timestamp{Wall: 1, Replica: "eu-1"})
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
	s.Defs.PutPoll(def("p"), hlc.Timestamp{Wall: 1, Replica: "eu-1"})
	for b.Loop() {
		if _, _, err := s.Totals("p"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSaveTallies is the node's 100 ms keeping of the tallies
// (known.go) with 100 polls held and one of them changed since the last
// save, as during a show: the scan of every poll plus one encode and one
// write.
func BenchmarkSaveTallies(b *testing.B) {
	s, _ := New(Config{Replica: "eu-1", Store: &memStore{}})
	for i := range 100 {
		d := def(fmt.Sprintf("p%d", i))
		s.Defs.PutPoll(d, hlc.Timestamp{Wall: 1, Replica: "eu-1"})
	}
	if _, err := s.SaveTallies(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s.Count("p7", "red", 1)
		if n, err := s.SaveTallies(); n != 1 || err != nil {
			b.Fatal(n, err)
		}
	}
}
