package client

import (
	"fmt"
	"strings"
	"testing"
)

// TestFollowerAppliesTheStreamsRules: a diff applies only on top of the
// frame before it; a gap asks for one resync and is ignored until the
// snapshot; a hidden view is not revealed by a diff; final ends it.
func TestFollowerAppliesTheStreamsRules(t *testing.T) {
	var f follower
	steps := []struct {
		frame      string
		ok, resync bool
		totals     string // fmt of Totals after the step, "" to skip
	}{
		{`{"type":"diff","seq":4,"totals":{"a":1}}`, false, true, ""},  // no snapshot yet
		{`{"type":"diff","seq":5,"totals":{"a":2}}`, false, false, ""}, // asked already
		{`{"type":"snapshot","seq":7,"status":"open","totals":{"a":2,"b":0},"total":2}`, true, false, "map[a:2 b:0]"},
		{`{"type":"heartbeat","seq":7}`, false, false, ""},
		{`{"type":"diff","seq":8,"totals":{"b":3},"total":5}`, true, false, "map[a:2 b:3]"},
		{`{"type":"diff","seq":10,"totals":{"b":9},"total":11}`, false, true, ""}, // seq 9 missed
		{`{"type":"snapshot","seq":11,"status":"open","totals":{"a":2,"b":9},"total":11}`, true, false, "map[a:2 b:9]"},
		{`{"type":"snapshot","seq":12,"status":"open","hidden":true,"total":0}`, true, false, "map[]"},
		{`{"type":"diff","seq":13,"totals":{"a":5}}`, false, true, ""}, // a reveal comes as a snapshot
		{`{"type":"final","seq":14,"status":"reconciled","totals":{"a":5,"b":9},"total":14,"digest":"d"}`, true, false, "map[a:5 b:9]"},
		{`not json`, false, false, ""},
		{`{"type":"ack","ref":"r"}`, false, false, ""},
	}
	for i, s := range steps {
		tl, ok, resync := f.apply([]byte(s.frame))
		if ok != s.ok || resync != s.resync {
			t.Fatalf("step %d %s: ok %v resync %v, want %v %v", i, s.frame, ok, resync, s.ok, s.resync)
		}
		if s.totals != "" && fmt.Sprint(tl.Totals) != s.totals {
			t.Fatalf("step %d: totals %v, want %s", i, tl.Totals, s.totals)
		}
	}
	if !f.t.Final || f.t.Digest != "d" || f.t.Total != 14 {
		t.Fatalf("final: %+v", f.t)
	}
}

// FuzzFollower: whatever a node (or something posing as one) sends, the
// follower never panics, and a delivered tally is its own copy.
func FuzzFollower(f *testing.F) {
	f.Add([]byte(`{"type":"snapshot","seq":1,"totals":{"a":1}}`), []byte(`{"type":"diff","seq":2,"totals":{"a":2}}`))
	f.Add([]byte(`{"type":"final","totals":null}`), []byte(`{"type":"diff","seq":18446744073709551615}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var fl follower
		for _, frame := range [][]byte{a, b, a} {
			tl, ok, _ := fl.apply(frame)
			if ok {
				if tl.Totals == nil {
					t.Fatal("a delivered tally without totals")
				}
				tl.Totals["x"] = 1 // the caller's: the follower's own is untouched
				if _, leaked := fl.t.Totals["x"]; leaked && !strings.Contains(string(frame), `"x"`) {
					t.Fatal("the delivered tally shares the follower's map")
				}
			}
		}
	})
}
