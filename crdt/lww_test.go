package crdt

import (
	"encoding/json"
	"errors"
	"testing"

	"pgregory.net/rapid"

	"tally/hlc"
)

func lwwMapGen() *rapid.Generator[*Map[string, string]] {
	return rapid.Custom(func(t *rapid.T) *Map[string, string] {
		m := &Map[string, string]{}
		for range rapid.IntRange(0, 10).Draw(t, "n") {
			ts := hlc.Timestamp{
				Wall:    rapid.Int64Range(1, 5).Draw(t, "wall"),
				Logical: rapid.Uint32Range(0, 2).Draw(t, "logical"),
				Replica: replicaGen.Draw(t, "replica"),
			}
			// The same (ts) always writes the same value: one write, one value.
			m.Set(optionGen.Draw(t, "key"), ts, ts.String())
		}
		return m
	})
}

func mergedMaps(ms ...*Map[string, string]) *Map[string, string] {
	out := &Map[string, string]{}
	for _, m := range ms {
		out.Merge(m)
	}
	return out
}

func mapsEqual(a, b *Map[string, string]) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestLWWMapMergeLaws(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := lwwMapGen().Draw(t, "a"), lwwMapGen().Draw(t, "b"), lwwMapGen().Draw(t, "c")
		if !mapsEqual(mergedMaps(a, b), mergedMaps(b, a)) {
			t.Fatal("not commutative")
		}
		if !mapsEqual(mergedMaps(mergedMaps(a, b), c), mergedMaps(a, mergedMaps(b, c))) {
			t.Fatal("not associative")
		}
		if !mapsEqual(mergedMaps(a, a), a) {
			t.Fatal("not idempotent")
		}
		// A delta since any timestamp, merged into a replica that has the
		// older writes, gives the full merge.
		cut := hlc.Timestamp{Wall: rapid.Int64Range(0, 5).Draw(t, "cut")}
		old := &Map[string, string]{}
		for _, k := range a.Keys() {
			if r, _ := a.Get(k); !cut.Less(r.TS) {
				old.Set(k, r.TS, r.Value)
			}
		}
		if !mapsEqual(mergedMaps(old, a.Since(cut)), a) {
			t.Fatal("delta merge differs from full state")
		}
	})
}

func TestRegisterLastWriterWins(t *testing.T) {
	var r Register[string]
	if r.IsSet() {
		t.Fatal("zero register is set")
	}
	t1 := hlc.Timestamp{Wall: 10, Replica: "a"}
	t2 := hlc.Timestamp{Wall: 10, Replica: "b"}
	if !r.Set(t2, "second") || r.Set(t1, "first") {
		t.Fatal("older write won")
	}
	if r.Value != "second" {
		t.Fatalf("value = %q", r.Value)
	}
}

func TestLWWMapJSONRejectsBadInput(t *testing.T) {
	var m Map[string, string]
	if err := json.Unmarshal([]byte(`{`), &m); err == nil {
		t.Error("truncated JSON accepted")
	}
	for _, in := range []string{`[{"key":"a","value":"x"}]`, `[{"key":1}]`, `"x"`} {
		var m Map[string, string]
		if err := json.Unmarshal([]byte(in), &m); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", in, err)
		}
	}
}

func FuzzLWWMapJSON(f *testing.F) {
	f.Add([]byte(`[{"key":"a","ts":{"wall":1,"logical":0,"replica":"r"},"value":"x"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Map[string, string]
		if err := json.Unmarshal(b, &m); err != nil {
			return
		}
		out, err := json.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		var back Map[string, string]
		if err := json.Unmarshal(out, &back); err != nil || !mapsEqual(&back, &m) {
			t.Fatalf("round trip failed: %v", err)
		}
	})
}
