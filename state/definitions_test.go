package state

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"tally/crdt"
	"tally/hlc"
	"tally/poll"
)

const t0 = int64(1_796_000_000_000)

func stamp(ms int64, replica string) hlc.Timestamp {
	return hlc.Timestamp{Wall: t0 + ms, Replica: replica}
}

func hiddenPoll() poll.Definition {
	return poll.Definition{ID: "p", Question: "Q?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: t0, ClosesAt: t0 + 60_000, GraceMs: 2000, Hidden: true}
}

// amend derives a new version from one a node holds, as ingest's amend
// does: the close stamped when this write changes it.
func amend(from crdt.Register[poll.Definition], ts hlc.Timestamp, change func(*poll.Definition)) crdt.Register[poll.Definition] {
	d := from.Value
	if d.CloseStamp == nil {
		cs := from.TS
		d.CloseStamp = &cs
	}
	if d.Quiz != nil {
		q := *d.Quiz
		d.Quiz = &q
	}
	opens, closes, parked := d.OpensAt, d.ClosesAt, d.Parked()
	change(&d)
	if d.OpensAt != opens || d.ClosesAt != closes || d.Parked() != parked {
		d.CloseStamp = &ts
	}
	return crdt.Register[poll.Definition]{TS: ts, Value: d}
}

func newState(t interface{ Fatal(...any) }, replica string) *State {
	s, err := New(Config{Replica: replica})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// An extend at one region and a reveal at another, each made before the
// other's write arrived, both survive at every node, in either order. (A
// whole-definition last-writer-wins lost the extend: the reveal was newer.)
func TestConcurrentExtendAndRevealBothSurvive(t *testing.T) {
	created := crdt.Register[poll.Definition]{TS: stamp(0, "eu"), Value: hiddenPoll()}
	extend := amend(created, stamp(100, "us"), func(d *poll.Definition) { d.ClosesAt += 60_000 })
	reveal := amend(created, stamp(150, "ap"), func(d *poll.Definition) { d.Hidden = false })
	for name, order := range map[string][]crdt.Register[poll.Definition]{
		"extend first": {created, extend, reveal},
		"reveal first": {created, reveal, extend},
	} {
		s := newState(t, "x")
		for _, r := range order {
			if _, err := s.Defs.PutPoll(r.Value, r.TS); err != nil {
				t.Fatal(err)
			}
		}
		got, _ := s.Defs.Poll("p")
		if got.Hidden || got.ClosesAt != t0+120_000 {
			t.Errorf("%s: hidden %v, closes_at +%d ms; want revealed and extended to +120000", name, got.Hidden, got.ClosesAt-t0)
		}
	}
}

// A quiz question's start (a new schedule) survives a reveal written at
// another region a moment later from the parked version.
func TestStartSurvivesAConcurrentReveal(t *testing.T) {
	parked := hiddenPoll()
	parked.Quiz = &poll.QuizQuestion{Quiz: "q", Correct: []string{"a"}, Points: 1000, LimitMs: 20_000}
	parked.GraceMs, parked.ClosesAt = 0, t0+20_000
	created := crdt.Register[poll.Definition]{TS: stamp(0, "eu"), Value: parked}
	start := amend(created, stamp(100, "us"), func(d *poll.Definition) {
		d.OpensAt, d.ClosesAt, d.Quiz.Started = t0+100, t0+20_100, true
	})
	reveal := amend(created, stamp(150, "ap"), func(d *poll.Definition) { d.Hidden = false })
	for _, order := range [][]crdt.Register[poll.Definition]{{created, start, reveal}, {created, reveal, start}} {
		s := newState(t, "x")
		for _, r := range order {
			s.Defs.PutPoll(r.Value, r.TS)
		}
		if got, _ := s.Defs.Poll("p"); got.Parked() || got.OpensAt != t0+100 || got.ClosesAt != t0+20_100 || got.Hidden {
			t.Errorf("parked %v opens +%d closes +%d hidden %v", got.Parked(), got.OpensAt-t0, got.ClosesAt-t0, got.Hidden)
		}
	}
}

// A question skipped by the quiz's end stays skipped (unseen) when a
// reveal written elsewhere from the parked version arrives after it.
func TestSkipSurvivesAConcurrentReveal(t *testing.T) {
	parked := hiddenPoll()
	parked.Quiz = &poll.QuizQuestion{Quiz: "q", Correct: []string{"a"}, Points: 1000, LimitMs: 20_000}
	parked.GraceMs, parked.ClosesAt = 0, t0+20_000
	created := crdt.Register[poll.Definition]{TS: stamp(0, "eu"), Value: parked}
	end := amend(created, stamp(100, "us"), func(d *poll.Definition) {
		d.OpensAt, d.ClosesAt, d.Quiz.Started, d.Quiz.Skipped, d.Hidden = t0+99, t0+100, true, true, false
	})
	reveal := amend(created, stamp(150, "ap"), func(d *poll.Definition) { d.Hidden = false })
	for _, order := range [][]crdt.Register[poll.Definition]{{created, end, reveal}, {created, reveal, end}} {
		s := newState(t, "x")
		for _, r := range order {
			s.Defs.PutPoll(r.Value, r.TS)
		}
		if got, _ := s.Defs.Poll("p"); !got.Quiz.Skipped || !got.Withheld(t0+1_000_000) || got.ClosesAt != t0+100 {
			t.Errorf("skipped %v withheld %v closes +%d", got.Quiz.Skipped, got.Withheld(t0+1_000_000), got.ClosesAt-t0)
		}
	}
}

// Of a close and an extend made at about the same time, the one written
// last wins, whatever order they arrive in; a later reveal keeps it.
func TestTheLastCloseWins(t *testing.T) {
	created := crdt.Register[poll.Definition]{TS: stamp(0, "eu"), Value: hiddenPoll()}
	extend := amend(created, stamp(100, "us"), func(d *poll.Definition) { d.ClosesAt += 60_000 })
	closeNow := amend(created, stamp(120, "eu"), func(d *poll.Definition) { d.ClosesAt = t0 + 120 })
	reveal := amend(extend, stamp(200, "ap"), func(d *poll.Definition) { d.Hidden = false }) // ap saw the extend only
	for _, order := range [][]crdt.Register[poll.Definition]{
		{created, extend, closeNow, reveal}, {created, reveal, closeNow, extend}, {created, closeNow, reveal, extend},
	} {
		s := newState(t, "x")
		for _, r := range order {
			s.Defs.PutPoll(r.Value, r.TS)
		}
		got, _ := s.Defs.Poll("p")
		if got.ClosesAt != t0+120 || got.Hidden {
			t.Errorf("closes_at +%d, hidden %v; want the close (+120) and revealed", got.ClosesAt-t0, got.Hidden)
		}
	}
}

// Whatever amendments three regions make, each from whatever versions it
// has seen, and in whatever order each node receives them, every node ends
// with the same definition: the close written last, revealed if any
// region revealed.
func TestDefinitionJoinConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		created := crdt.Register[poll.Definition]{TS: stamp(0, "eu"), Value: hiddenPoll()}
		writes := []crdt.Register[poll.Definition]{created}
		replicas := []string{"eu", "us", "ap"}
		lastClose, lastCloseAt, revealed := stamp(0, "eu"), t0+60_000, false
		n := rapid.IntRange(1, 8).Draw(t, "amendments")
		for i := range n {
			// The amending region holds the join of some of the writes so far.
			seen := newState(t, "seen")
			for _, w := range writes {
				if rapid.Bool().Draw(t, fmt.Sprint("sees", i)) || w.TS == created.TS {
					seen.Defs.PutPoll(w.Value, w.TS)
				}
			}
			from, _ := seen.Defs.PollRegister("p")
			ts := stamp(int64(10*(i+1)), replicas[rapid.IntRange(0, 2).Draw(t, "replica")])
			var w crdt.Register[poll.Definition]
			switch rapid.IntRange(0, 2).Draw(t, "kind") {
			case 0:
				to := t0 + 60_000 + int64(rapid.IntRange(1, 100).Draw(t, "by"))*1000
				w = amend(from, ts, func(d *poll.Definition) { d.ClosesAt = to })
			case 1:
				to := t0 + int64(rapid.IntRange(1, 59).Draw(t, "at"))*1000
				w = amend(from, ts, func(d *poll.Definition) { d.ClosesAt = to })
			default:
				w = amend(from, ts, func(d *poll.Definition) { d.Hidden = false })
				revealed = true
			}
			if w.Value.ClosesAt != from.Value.ClosesAt && lastClose.Less(ts) {
				lastClose, lastCloseAt = ts, w.Value.ClosesAt
			}
			writes = append(writes, w)
		}
		var first poll.Definition
		for k := range 3 {
			s := newState(t, "node")
			for _, i := range rapid.Permutation(indexes(len(writes))).Draw(t, fmt.Sprint("order", k)) {
				s.Defs.PutPoll(writes[i].Value, writes[i].TS)
			}
			got, _ := s.Defs.Poll("p")
			if k == 0 {
				first = got
			} else if !sameDefinition(got, first) {
				t.Fatalf("nodes differ: %+v and %+v", got, first)
			}
			if got.Hidden == revealed || got.ClosesAt != lastCloseAt {
				t.Fatalf("hidden %v (revealed %v), closes_at %d, want %d", got.Hidden, revealed, got.ClosesAt, lastCloseAt)
			}
		}
	})
}

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
