package api

import (
	"encoding/json"

	"tally/quiz"
)

// The JSON of the live streams (GET /v1/polls/{poll}/live and …/events,
// GET /v1/quizzes/{quiz}/live): package fanout encodes these frames,
// clients decode them.

// Frame types.
const (
	TypeSnapshot  = "snapshot"
	TypeDiff      = "diff"
	TypeFinal     = "final"
	TypeHeartbeat = "heartbeat"
	TypeAck       = "ack"
	TypeError     = "error"
)

// Frame is one frame of a live stream (docs/api.md, "The live stream"). Snapshots and finals carry every
// option in Totals; diffs only the options that changed since seq-1.
type Frame struct {
	Type   string `json:"type"`
	Poll   string `json:"poll"`
	Seq    uint64 `json:"seq"`
	AsOfMs int64  `json:"as_of_ms"`
	// TickMs is the stream's tick now: --tick, longer while the node is
	// busy (at most --max-tick); the next frame comes within it.
	TickMs      int64            `json:"tick_ms,omitempty"`
	Status      string           `json:"status"`
	Totals      map[string]int64 `json:"totals,omitempty"`
	Total       int64            `json:"total"`
	VotesPerMin float64          `json:"votes_per_min"`
	Viewers     int64            `json:"viewers"`
	Region      string           `json:"region,omitempty"`
	Question    string           `json:"question,omitempty"`
	Options     []FrameOption    `json:"options,omitempty"`
	OpensAt     int64            `json:"opens_at,omitempty"`
	ClosesAt    int64            `json:"closes_at,omitempty"`
	Event       string           `json:"event,omitempty"`
	// Hidden: the host has not revealed the counts; the frame has none.
	Hidden bool         `json:"hidden,omitempty"`
	Leader string       `json:"leader,omitempty"`
	Events []FrameEvent `json:"events,omitempty"`
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

// FrameOption names an option in a snapshot.
type FrameOption struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// FrameEvent is something worth showing as it happens.
type FrameEvent struct {
	Kind   string `json:"kind"`             // leader, overtake, milestone
	Option string `json:"option,omitempty"` // the new leader, or the option that overtook
	Passed string `json:"passed,omitempty"` // the option overtaken
	Total  int64  `json:"total,omitempty"`  // the milestone reached
}

// SocketMessage is a message a client sends on a live WebSocket.
type SocketMessage struct {
	Type  string `json:"type"` // "vote", "resync"; on a quiz's stream also "join"
	Ref   string `json:"ref,omitempty"`
	Poll  string `json:"poll,omitempty"`  // on a quiz's stream, the question a vote answers
	Voter string `json:"voter,omitempty"` // for "join": the participant's voter id
	// Name is, for "join", the participant's display name (optional): a
	// quiz's lobby shows the newest names of counted joins.
	Name string          `json:"name,omitempty"`
	Body json.RawMessage `json:"body,omitempty"` // for "vote": the body of POST …/votes
	// Token is the voter token for "vote" (what the Tally-Session header
	// carries over HTTP), bound to this client's address and User-Agent.
	Token string `json:"token,omitempty"`
}

// SocketReply answers a SocketMessage: Type is TypeAck with the Result
// (a vote's: a VoteResponse) or TypeError with the Error.
type SocketReply struct {
	Type   string     `json:"type"`
	Ref    string     `json:"ref,omitempty"`
	Result any        `json:"result,omitempty"`
	Error  *ErrorInfo `json:"error,omitempty"`
}
