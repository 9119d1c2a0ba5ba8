package fanout

import (
	"encoding/json"
	"slices"
	"strings"

	"tally/api"
)

// The frames' JSON types are the API's (package api), shared with clients.
type (
	Message    = api.Frame
	OptionInfo = api.FrameOption
	Event      = api.FrameEvent
)

// Frame types.
const (
	TypeSnapshot  = api.TypeSnapshot
	TypeDiff      = api.TypeDiff
	TypeFinal     = api.TypeFinal
	TypeHeartbeat = api.TypeHeartbeat
	TypeAck       = api.TypeAck
	TypeError     = api.TypeError
)

// view is what a hub knows of its poll at one tick.
type view struct {
	final   bool  // the certified result
	hidden  bool  // counts not shown
	viewers int64 // across the cluster
	status  string
	totals  map[string]int64
	total   int64
	records uint64
	board   string // the quiz leaderboard's digest; "" for a poll
}

// changedOptions returns the options whose count differs between a and b.
func changedOptions(prev, cur map[string]int64) map[string]int64 {
	out := make(map[string]int64)
	for o, n := range cur {
		if prev[o] != n {
			out[o] = n
		}
	}
	return out
}

// leader returns the option with the most votes (ties: the smaller id), or
// "" when nobody has voted.
func leader(totals map[string]int64) string {
	best, bestN := "", int64(0)
	for o, n := range totals {
		if n > bestN || n == bestN && n > 0 && strings.Compare(o, best) < 0 {
			best, bestN = o, n
		}
	}
	return best
}

// milestones are the round totals worth announcing.
var milestones = []int64{10, 50, 100, 500, 1_000, 5_000, 10_000, 50_000, 100_000, 500_000, 1_000_000, 5_000_000, 10_000_000}

// events compares two consecutive views.
func events(prev, cur view) []Event {
	var out []Event
	if l, pl := leader(cur.totals), leader(prev.totals); l != "" && l != pl {
		out = append(out, Event{Kind: "leader", Option: l})
	}
	options := make([]string, 0, len(cur.totals))
	for o := range cur.totals {
		options = append(options, o)
	}
	slices.Sort(options)
	for _, a := range options {
		for _, b := range options {
			if a != b && prev.totals[a] <= prev.totals[b] && cur.totals[a] > cur.totals[b] && prev.totals[a]+prev.totals[b] > 0 {
				out = append(out, Event{Kind: "overtake", Option: a, Passed: b})
			}
		}
	}
	for _, m := range milestones {
		if prev.total < m && cur.total >= m {
			out = append(out, Event{Kind: "milestone", Total: m})
		}
	}
	return out
}

func encode(m any) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // frames have only plain fields
	}
	return b
}
