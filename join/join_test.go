package join

import (
	"strconv"
	"testing"
	"time"

	"tally/ids"
	"tally/poll"
)

// BenchmarkJoinIndex: what resolving a code costs at 10,000 polls, with
// the index built (a map lookup) and rebuilt (the once-a-second cost).
//
//	go test -run XXX -bench JoinIndex ./join
func BenchmarkJoinIndex(b *testing.B) {
	defs := make([]poll.Definition, 10_000)
	for i := range defs {
		defs[i] = poll.Definition{ID: "poll-" + strconv.Itoa(i), Event: "event-" + strconv.Itoa(i/10)}
	}
	polls := func() []poll.Definition { return defs }
	code := ids.JoinCode(ids.JoinPoll, "poll-1234")
	now := time.Unix(1_800_000_000, 0)
	b.Run("lookup", func(b *testing.B) {
		var x index
		x.lookup(code, now, polls)
		for b.Loop() {
			if _, ok := x.lookup(code, now, polls); !ok {
				b.Fatal("not found")
			}
		}
	})
	b.Run("rebuild", func(b *testing.B) {
		var x index
		t := now
		for b.Loop() {
			t = t.Add(rebuildEvery)
			x.lookup(code, t, polls)
		}
	})
}
