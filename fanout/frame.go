package fanout

import (
	"encoding/json"
	"slices"
	"strings"

	"tally/quiz"
)

// Frame types.
const (
	TypeSnapshot  = "snapshot"
	TypeDiff      = "diff"
	TypeFinal     = "final"
	TypeHeartbeat = "heartbeat"
	TypeAck       = "ack"
	TypeError     = "error"
)

// Message is one frame sent to viewers. Snapshots and finals carry every
// option in Totals; diffs only the options that changed since seq-1.
type Message struct {
	Type        string           `json:"type"`
	Poll        string           `json:"poll"`
	Seq         uint64           `json:"seq"`
	AsOfMs      int64            `json:"as_of_ms"`
	Status      string           `json:"status"`
	Totals      map[string]int64 `json:"totals,omitempty"`
	Total       int64            `json:"total"`
	VotesPerMin float64          `json:"votes_per_min"`
	Viewers     int64            `json:"viewers"`
	Region      string           `json:"region,omitempty"`
	Question    string           `json:"question,omitempty"`
	Options     []OptionInfo     `json:"options,omitempty"`
	OpensAt     int64            `json:"opens_at,omitempty"`
	ClosesAt    int64            `json:"closes_at,omitempty"`
	Event       string           `json:"event,omitempty"`
	// Hidden: the host has not revealed the counts; the frame has none.
	Hidden bool    `json:"hidden,omitempty"`
	Leader string  `json:"leader,omitempty"`
	Events []Event `json:"events,omitempty"`
	// Regions is the freshness vector: per region, the age in ms of the
	// newest state this node has from it (its own region: 0).
	Regions map[string]int64 `json:"regions,omitempty"`
	// Digest is the certified result's digest, in the final frame.
	Digest string `json:"digest,omitempty"`
	// Leaderboard is a quiz question's quiz's top 10 over its certified
	// questions (docs/quiz.md), in every snapshot and in the diff that
	// changes it; LeaderboardDigest names the whole ranking.
	Leaderboard       []quiz.Standing `json:"leaderboard,omitempty"`
	LeaderboardDigest string          `json:"leaderboard_digest,omitempty"`
}

// OptionInfo names an option in a snapshot.
type OptionInfo struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// Event is something worth showing as it happens.
type Event struct {
	Kind   string `json:"kind"`             // leader, overtake, milestone
	Option string `json:"option,omitempty"` // the new leader, or the option that overtook
	Passed string `json:"passed,omitempty"` // the option overtaken
	Total  int64  `json:"total,omitempty"`  // the milestone reached
}

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
