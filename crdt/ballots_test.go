package crdt_test

import (
	"fmt"
	"hash/fnv"
	"iter"
	"maps"
	"runtime"
	"testing"

	"pgregory.net/rapid"

	"tally/crdt"
	"tally/ledger"
)

func hash64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

func ballotOf(r *ledger.Record) crdt.Ballot {
	return crdt.Ballot{Replica: r.Replica, Seq: r.Seq, Wall: r.Wall, Logical: r.Logical, Voter: hash64(r.Voter), Idem: hash64(r.Idem),
		Option: r.Option, Eligible: r.Counted && !r.Late}
}

// node is one replica's view in the model: its set and its own counters.
type node struct {
	replica string
	set     *crdt.Ballots
	p, n    map[string]int64 // this replica's PN-counter, by option
}

func (nd *node) add(b crdt.Ballot) {
	nd.set.Add(b, nd.move)
}

func (nd *node) move(c crdt.Change) {
	if c.FromReplica == nd.replica {
		nd.n[c.FromOption]++
	}
	if c.ToReplica == nd.replica {
		nd.p[c.ToOption]++
	}
}

// TestBallotsConvergeToReconcile: votes, changes of mind and retries at
// random replicas (some shadowed, some late, a close moved early), their
// ballots delivered to every replica in any order, some twice, with the
// close learned at any point. Once every replica has every ballot, each
// replica's set counts what ledger.Reconcile certifies from the ledgers,
// and so does the sum of every replica's own counters, each moved only by
// its own ballots winning or losing. The same holds for a quiz question,
// where each voter's first ballot counts (NewFirstBallots, FirstWins).
func TestBallotsConvergeToReconcile(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		firstWins := rapid.Bool().Draw(t, "first wins")
		replicas := []string{"ap-1", "eu-1", "us-1"}
		options := []string{"a", "b", "c"}
		chains := map[string][]ledger.Record{}
		clock := map[string]int64{}
		type sent struct{ voter, option, idem string }
		var history []sent
		steps := rapid.IntRange(1, 40).Draw(t, "votes")
		for i := range steps {
			rep := rapid.SampledFrom(replicas).Draw(t, "replica")
			voter := fmt.Sprintf("v%d", rapid.IntRange(0, 5).Draw(t, "voter"))
			v := sent{voter: voter, option: rapid.SampledFrom(options).Draw(t, "option"), idem: fmt.Sprintf("k%d", i)}
			if len(history) > 0 && rapid.IntRange(0, 3).Draw(t, "retry?") == 0 {
				v = history[rapid.IntRange(0, len(history)-1).Draw(t, "retried")] // the same request again
			}
			history = append(history, v)
			dup := false
			for _, r := range chains[rep] {
				dup = dup || r.Idem == v.idem // the replica's own index answers duplicate
			}
			if dup {
				continue
			}
			wall := max(clock[rep], int64(rapid.IntRange(1, 30).Draw(t, "wall")))
			clock[rep] = wall
			r := ledger.Record{Poll: "p", Replica: rep, Seq: uint64(len(chains[rep]) + 1), Wall: wall, Logical: uint32(rapid.IntRange(0, 2).Draw(t, "logical")),
				Voter: v.voter, Option: v.option, Idem: v.idem, Trust: 1, Counted: true, IPHash: "00"}
			switch rapid.IntRange(0, 9).Draw(t, "kind") {
			case 0:
				r.Counted, r.Trust = false, 0.1 // shadowed
			case 1:
				r.Counted, r.Late = false, true
			}
			if n := len(chains[rep]); n > 0 {
				r.Prev = chains[rep][n-1].Hash()
			}
			chains[rep] = append(chains[rep], r)
		}
		closesAt := int64(0)
		if rapid.Bool().Draw(t, "closed early?") {
			closesAt = int64(rapid.IntRange(5, 30).Draw(t, "closes at"))
		}
		var streams []iter.Seq2[ledger.Record, error]
		var all []crdt.Ballot
		for _, rep := range replicas {
			recs := chains[rep]
			streams = append(streams, func(yield func(ledger.Record, error) bool) {
				for _, r := range recs {
					if !yield(r, nil) {
						return
					}
				}
			})
			for i := range recs {
				all = append(all, ballotOf(&recs[i]))
			}
		}
		want, err := ledger.ReconcileWith(ledger.ReconcileConfig{ClosesAt: closesAt, Poll: "p", FirstWins: firstWins}, streams...)
		if err != nil {
			t.Fatal(err)
		}
		sum := map[string]int64{}
		for _, rep := range replicas {
			set := crdt.NewBallots(0)
			if firstWins {
				set = crdt.NewFirstBallots(0)
			}
			nd := &node{replica: rep, set: set, p: map[string]int64{}, n: map[string]int64{}}
			order := rapid.Permutation(append(append([]crdt.Ballot{}, all...), all[:rapid.IntRange(0, len(all)).Draw(t, "redelivered")]...)).Draw(t, "order")
			closeAt := rapid.IntRange(0, len(order)).Draw(t, "close learned at")
			for i, b := range order {
				if i == closeAt && closesAt > 0 {
					nd.set.SetClosesAt(closesAt, nd.move)
				}
				nd.add(b)
			}
			if closeAt == len(order) && closesAt > 0 {
				nd.set.SetClosesAt(closesAt, nd.move)
			}
			got := nd.set.Totals()
			if !sameTotals(got, want.Totals) {
				t.Fatalf("%s's set counts %v, Reconcile %v", rep, got, want.Totals)
			}
			for _, o := range options {
				if nd.p[o] < nd.n[o] {
					t.Fatalf("%s retracted more %s than it counted: P %d N %d", rep, o, nd.p[o], nd.n[o])
				}
				sum[o] += nd.p[o] - nd.n[o]
			}
		}
		if !sameTotals(sum, want.Totals) {
			t.Fatalf("the replicas' counters sum to %v, Reconcile %v", sum, want.Totals)
		}
	})
}

func sameTotals(got map[string]int64, want map[string]uint64) bool {
	g := maps.Clone(got)
	maps.DeleteFunc(g, func(_ string, v int64) bool { return v == 0 })
	w := map[string]int64{}
	for k, v := range want {
		if v != 0 {
			w[k] = int64(v)
		}
	}
	return maps.Equal(g, w)
}

func TestBallotsRefuseWhatTheyCannotHold(t *testing.T) {
	s := crdt.NewBallots(0)
	if s.Add(crdt.Ballot{Replica: "r", Seq: 0, Option: "a"}, nil) || s.Add(crdt.Ballot{Replica: "r", Seq: 1 << 32, Option: "a"}, nil) {
		t.Fatal("held a ballot with an impossible Seq")
	}
	b := crdt.Ballot{Replica: "r", Seq: 3, Voter: 1, Idem: 1, Option: "a", Eligible: true}
	if !s.Add(b, nil) || s.Add(b, nil) {
		t.Fatal("a redelivery was not a no-op")
	}
	if s.Have("r") != 0 {
		t.Fatalf("have %d with Seq 1 and 2 missing", s.Have("r"))
	}
	s.Add(crdt.Ballot{Replica: "r", Seq: 1, Voter: 2, Idem: 2, Option: "b"}, nil)
	s.Add(crdt.Ballot{Replica: "r", Seq: 2, Voter: 3, Idem: 3, Option: "b"}, nil)
	if s.Have("r") != 3 || len(s.Since("r", 1, 10)) != 2 || len(s.Since("r", 0, 1)) != 1 {
		t.Fatalf("have %d, since %v", s.Have("r"), s.Since("r", 1, 10))
	}
	if b, ok := s.Idem(1, 1); !ok || b.Replica != "r" || b.Seq != 3 {
		t.Fatalf("idem lookup: %+v %v", b, ok)
	}
	if _, ok := s.Idem(1, 99); ok {
		t.Fatal("an idempotency key matched another voter's ballot")
	}
}

func TestBallotsFollowHLCOrderNotArrival(t *testing.T) {
	s := crdt.NewBallots(0)
	var moves []string
	move := func(c crdt.Change) { moves = append(moves, c.FromOption+">"+c.ToOption) }
	add := func(option string, wall int64, seq uint64) {
		s.Add(crdt.Ballot{Replica: "eu-1", Seq: seq, Wall: wall, Voter: 1, Idem: seq, Option: option, Eligible: true}, move)
	}
	add("a", 10, 1)
	add("b", 30, 3)
	add("c", 20, 2) // older than b (it arrived late): superseded
	add("b", 40, 4) // same option: nothing moves
	add("c", 40, 5) // same time, later seq: wins
	want := []string{">a", "a>b", "b>c"}
	if fmt.Sprint(moves) != fmt.Sprint(want) {
		t.Fatalf("moves %v, want %v", moves, want)
	}
}

// BenchmarkBallotsAdd: one ballot into a poll's voter state of 100,000
// voters (10% change their mind), as ingest and gossip apply them.
func BenchmarkBallotsAdd(b *testing.B) {
	s := crdt.NewBallots(0)
	move := func(crdt.Change) {}
	i := uint64(0)
	for b.Loop() {
		i++
		s.Add(crdt.Ballot{Replica: "eu-1", Seq: i, Wall: int64(i), Voter: i % 100_000, Idem: i, Option: "red", Eligible: true}, move)
	}
	b.ReportMetric(float64(s.Bytes())/float64(max(1, s.Voters())), "bytes/voter")
}

// BenchmarkBallotsMemory measures the heap a poll's voter state takes: a
// million voters, one ballot each, then 10% of them changing their mind,
// as the Go heap sees it (not Bytes' estimate). Run with -benchtime 1x.
func BenchmarkBallotsMemory(b *testing.B) {
	const voters = 1_000_000
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := crdt.NewBallots(0)
		seq := uint64(0)
		for v := range uint64(voters) {
			seq++
			s.Add(crdt.Ballot{Replica: "eu-1", Seq: seq, Wall: int64(seq), Voter: v*0x9e3779b97f4a7c15 + 1, Idem: seq * 0xbf58476d1ce4e5b9, Option: "red", Eligible: true}, nil)
		}
		for v := uint64(0); v < voters; v += 10 {
			seq++
			s.Add(crdt.Ballot{Replica: "eu-1", Seq: seq, Wall: int64(seq), Voter: v*0x9e3779b97f4a7c15 + 1, Idem: seq * 0xbf58476d1ce4e5b9, Option: "blue", Eligible: true}, nil)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/voters, "heap-bytes/voter")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(s.Len()), "heap-bytes/ballot")
		b.ReportMetric(float64(s.Bytes())/voters, "estimate-bytes/voter")
		runtime.KeepAlive(s)
	}
}

// A ballot with a Seq far ahead (a hostile or broken peer) costs one chunk
// and a pointer per chunk skipped, not the entries in between.
func TestBallotsFarSeqIsCheap(t *testing.T) {
	s := crdt.NewBallots(0)
	s.Add(crdt.Ballot{Replica: "r", Seq: 1, Voter: 1, Idem: 1, Option: "a", Eligible: true}, nil)
	s.Add(crdt.Ballot{Replica: "r", Seq: 1<<32 - 1, Voter: 2, Idem: 2, Option: "a", Eligible: true}, nil)
	if b := s.Bytes(); b > 16<<20 {
		t.Fatalf("%d bytes held for two ballots", b)
	}
	if all := s.All(); len(all) != 2 || all[1].Seq != 1<<32-1 {
		t.Fatalf("all: %+v", all)
	}
	if s.Have("r") != 1 || len(s.Since("r", 1, 10)) != 0 {
		t.Fatal("the hole is not a gap")
	}
}

// Latest is the voter's latest ballot by stamp, counted or not, whatever
// order the ballots arrived in.
func TestLatestIsTheVotersLatestStamp(t *testing.T) {
	s := crdt.NewBallots(0)
	if _, _, ok := s.Latest(1); ok {
		t.Fatal("a voter with no ballot has a latest stamp")
	}
	s.Add(crdt.Ballot{Replica: "b", Seq: 1, Wall: 200, Logical: 3, Voter: 1, Idem: 10, Option: "x", Eligible: true}, nil)
	s.Add(crdt.Ballot{Replica: "a", Seq: 1, Wall: 100, Logical: 9, Voter: 1, Idem: 11, Option: "y", Eligible: true}, nil)
	s.Add(crdt.Ballot{Replica: "a", Seq: 2, Wall: 200, Logical: 1, Voter: 1, Idem: 12, Option: "y"}, nil)
	s.Add(crdt.Ballot{Replica: "a", Seq: 3, Wall: 900, Logical: 0, Voter: 2, Idem: 13, Option: "y", Eligible: true}, nil)
	if w, l, ok := s.Latest(1); !ok || w != 200 || l != 3 {
		t.Fatalf("latest of voter 1: %d.%d %v, want 200.3", w, l, ok)
	}
}
