package crdt

import (
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"tally/ids"
)

var (
	replicaGen = rapid.SampledFrom([]string{"eu-1", "us-1", "ap-1", "sa-1"})
	optionGen  = rapid.SampledFrom([]string{"red", "green", "blue"})
)

// op is one thing a replica does to its own entries.
type op struct {
	replica, option string
	delta           int64
	records         uint64
}

func opGen() *rapid.Generator[op] {
	return rapid.Custom(func(t *rapid.T) op {
		return op{
			replica: replicaGen.Draw(t, "replica"),
			option:  optionGen.Draw(t, "option"),
			delta:   rapid.Int64Range(-3, 5).Draw(t, "delta"),
			records: rapid.Uint64Range(0, 2).Draw(t, "records"),
		}
	})
}

func (o op) apply(t *Tally) {
	t.Add(o.replica, o.option, o.delta)
	t.AddRecords(o.replica, o.records)
}

// tallyGen builds a tally as one replica's view would be: the ops of
// several replicas applied to it.
func tallyGen() *rapid.Generator[*Tally] {
	return rapid.Custom(func(t *rapid.T) *Tally {
		tl := NewTally()
		for _, o := range rapid.SliceOfN(opGen(), 0, 20).Draw(t, "ops") {
			o.apply(tl)
		}
		return tl
	})
}

func merged(ts ...*Tally) *Tally {
	out := NewTally()
	for _, t := range ts {
		out.Merge(t)
	}
	return out
}

func TestTallyMergeLaws(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := tallyGen().Draw(t, "a"), tallyGen().Draw(t, "b"), tallyGen().Draw(t, "c")
		if !merged(a, b).Equal(merged(b, a)) {
			t.Fatal("merge is not commutative")
		}
		if !merged(merged(a, b), c).Equal(merged(a, merged(b, c))) {
			t.Fatal("merge is not associative")
		}
		aa := a.Clone()
		if aa.Merge(a) {
			t.Fatal("merging a tally into itself reported a change")
		}
		if !aa.Equal(a) {
			t.Fatal("merge is not idempotent")
		}
	})
}

func TestPNCounterMergeLaws(t *testing.T) {
	counter := rapid.Custom(func(t *rapid.T) PNCounter {
		var c PNCounter
		for range rapid.IntRange(0, 10).Draw(t, "n") {
			c.Add(replicaGen.Draw(t, "r"), rapid.Int64Range(-5, 5).Draw(t, "d"))
		}
		return c
	})
	merge := func(cs ...PNCounter) PNCounter {
		var out PNCounter
		for _, c := range cs {
			out.Merge(&c)
		}
		return out
	}
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := counter.Draw(t, "a"), counter.Draw(t, "b"), counter.Draw(t, "c")
		ab, ba := merge(a, b), merge(b, a)
		if !ab.Equal(&ba) {
			t.Fatal("not commutative")
		}
		l, r := merge(merge(a, b), c), merge(a, merge(b, c))
		if !l.Equal(&r) {
			t.Fatal("not associative")
		}
		if aa := merge(a, a); !aa.Equal(&a) {
			t.Fatal("not idempotent")
		}
	})
}

// TestConvergesToModel runs random operations at replicas, each replica only
// touching its own entries, then delivers snapshots of every replica's state
// to every other replica in random order and with duplicates. All replicas
// must end equal, and equal to the model: the plain sum of all operations.
func TestConvergesToModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		names := []string{"eu-1", "us-1", "ap-1"}
		states := map[string]*Tally{}
		for _, n := range names {
			states[n] = NewTally()
		}
		model := map[string]int64{}
		var modelRecords uint64
		var snapshots []*Tally
		for _, o := range rapid.SliceOfN(opGen(), 1, 40).Draw(t, "ops") {
			o.replica = names[int(o.replica[0])%len(names)]
			o.apply(states[o.replica])
			model[o.option] += o.delta
			modelRecords += o.records
			// Now and then, a snapshot goes on the wire.
			if rapid.Bool().Draw(t, "snapshot") {
				snapshots = append(snapshots, states[o.replica].Clone())
			}
		}
		for _, n := range names {
			snapshots = append(snapshots, states[n].Clone())
		}
		for _, n := range names {
			order := rapid.Permutation(snapshots).Draw(t, "order-"+n)
			dups := rapid.SliceOfN(rapid.SampledFrom(snapshots), 0, 5).Draw(t, "dups-"+n)
			for _, s := range append(order, dups...) {
				states[n].Merge(s)
			}
		}
		first := states[names[0]]
		for _, n := range names[1:] {
			if !states[n].Equal(first) {
				t.Fatalf("replica %s did not converge", n)
			}
		}
		for option, want := range model {
			if got := first.Value(option); got != want {
				t.Fatalf("option %s = %d, model %d", option, got, want)
			}
		}
		var records uint64
		for _, n := range first.RecordCounts() {
			records += n
		}
		if records != modelRecords {
			t.Fatalf("records = %d, model %d", records, modelRecords)
		}
	})
}

// TestDeltaEqualsFullMerge checks that a replica which saw a's state at
// version v and then merges a.DeltaSince(v) ends where merging all of a
// would put it.
func TestDeltaEqualsFullMerge(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := tallyGen().Draw(t, "a")
		b := tallyGen().Draw(t, "b")
		b.Merge(a)
		v := a.Version()
		for _, o := range rapid.SliceOfN(opGen(), 0, 20).Draw(t, "more") {
			o.apply(a)
		}
		viaDelta := b.Clone()
		viaDelta.Merge(a.DeltaSince(v))
		full := b.Clone()
		full.Merge(a)
		if !viaDelta.Equal(full) {
			t.Fatal("delta merge differs from full merge")
		}
		// A replica's own delta carries only its entries.
		r := replicaGen.Draw(t, "r")
		own := a.DeltaOf(r, 0)
		for _, option := range own.Options() {
			c := own.Counter(option)
			for _, rr := range append(c.P.Replicas(), c.N.Replicas()...) {
				if rr != r {
					t.Fatalf("DeltaOf(%s) carries %s", r, rr)
				}
			}
		}
	})
}

func TestTallyEncodingRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := tallyGen().Draw(t, "a")
		b, err := a.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeTally(b)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(a) {
			t.Fatal("decoded tally differs")
		}
	})
}

func TestDecodeTallyRejectsHostileInput(t *testing.T) {
	good := NewTally()
	good.Add("eu-1", "red", 3)
	good.AddRecords("eu-1", 3)
	enc, _ := good.MarshalBinary()

	long := make([]byte, MaxIDLen+1)
	for i := range long {
		long[i] = 'x'
	}
	cases := map[string][]byte{
		"empty":           nil,
		"bad magic":       []byte("XX1"),
		"truncated":       enc[:len(enc)-1],
		"trailing":        append(append([]byte{}, enc...), 0),
		"huge replicas":   append([]byte(tallyMagic), 0xff, 0xff, 0xff, 0x7f),
		"long id":         append(append([]byte(tallyMagic), 1, byte(len(long))), long...),
		"empty id":        append([]byte(tallyMagic), 1, 0),
		"bad utf8":        append([]byte(tallyMagic), 1, 2, 0xff, 0xfe, 0, 0),
		"index oob":       append(append([]byte(tallyMagic), 1, 1, 'r', 1, 1, 'o', 1), 5, 1, 0, 0),
		"bad varint":      append([]byte(tallyMagic), 0x80, 0x80, 0x80),
		"entries > reps":  append(append([]byte(tallyMagic), 1, 1, 'r', 1, 1, 'o'), 9),
		"records no reps": append([]byte(tallyMagic), 0, 0, 1, 0, 1),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeTally(in); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

func FuzzDecodeTally(f *testing.F) {
	seed := NewTally()
	seed.Add("eu-1", "red", 2)
	seed.Add("us-1", "red", -1)
	seed.AddRecords("eu-1", 4)
	enc, _ := seed.MarshalBinary()
	f.Add(enc)
	f.Add([]byte(tallyMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		tl, err := DecodeTally(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not ErrMalformed: %v", err)
			}
			return
		}
		again, err := tl.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeTally(again)
		if err != nil || !back.Equal(tl) {
			t.Fatalf("re-encoding does not round-trip: %v", err)
		}
	})
}

func ExampleTally() {
	eu, us := NewTally(), NewTally()
	eu.Add("eu-1", "red", 1)
	us.Add("us-1", "red", 1)
	us.Add("us-1", "blue", 1)
	us.Add("us-1", "red", -1) // a us-1 voter changed red → blue
	eu.Merge(us)
	us.Merge(eu)
	fmt.Println(eu.Value("red"), eu.Value("blue"), eu.Equal(us))
	// Output: 1 1 true
}

// TestOneIDLimit: the decoder's id limit is the one every id is held to.
func TestOneIDLimit(t *testing.T) {
	if MaxIDLen != ids.MaxLen {
		t.Fatalf("crdt.MaxIDLen %d, ids.MaxLen %d", MaxIDLen, ids.MaxLen)
	}
}
