package fanout

import (
	"encoding/json"
	"testing"
	"time"

	"tally/hlc"
	"tally/poll"
	"tally/state"
)

// TestRevealSendsWholeSnapshot: a hidden poll's viewers learn nothing of
// its counts — neither numbers nor the timing of a change — and the frame
// that reveals it carries every option's count, so no view shows a count
// it was not sent (issue 25, item 0).
func TestRevealSendsWholeSnapshot(t *testing.T) {
	st, err := state.New(state.Config{Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	def := poll.Definition{ID: "p", Question: "Q?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: time.Now().Add(-time.Minute).UnixMilli(), ClosesAt: time.Now().Add(time.Hour).UnixMilli(), GraceMs: 1000, Hidden: true}
	if _, err := st.Defs.PutPoll(def, hlc.Timestamp{Wall: 1, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, st, nil)
	fs := &fakeSender{}
	v, err := s.join("p", "ip", "test", fs)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return len(fs.got()) == 1 })

	// Votes while hidden: no frame goes out (a frame per vote would leak
	// its timing), whatever the number of ticks.
	for i := range 3 {
		st.Count("p", "a", 3)
		st.Count("p", "b", int64(4+i))
		v.hub.tick()
	}
	time.Sleep(20 * time.Millisecond) // give a wrong implementation the chance to send
	if n := len(fs.got()); n != 1 {
		t.Fatalf("a hidden poll's viewer got %d frames for votes it cannot see: %s", n, fs.got()[n-1])
	}

	// A watcher that joined while hidden, and one more vote for a only.
	amend(t, st, "p", 3, func(d *poll.Definition) { d.Hidden = false })
	st.Count("p", "a", 0)
	v.hub.tick()
	waitUntil(t, func() bool { return len(fs.got()) == 2 })
	var m Message
	if err := json.Unmarshal(fs.got()[1], &m); err != nil {
		t.Fatal(err)
	}
	if m.Type != TypeSnapshot || m.Hidden || m.Totals["a"] != 9 || m.Totals["b"] != 15 || m.Total != 24 || len(m.Totals) != 2 {
		t.Fatalf("the reveal frame is not a whole snapshot: %s", fs.got()[1])
	}

	// After the reveal, diffs resume.
	st.Count("p", "a", 1)
	v.hub.tick()
	waitUntil(t, func() bool { return len(fs.got()) == 3 })
	if err := json.Unmarshal(fs.got()[2], &m); err != nil {
		t.Fatal(err)
	}
	if m.Type != TypeDiff || m.Totals["a"] != 10 || m.Total != 25 {
		t.Fatalf("after the reveal: %s", fs.got()[2])
	}
}
