package api

import "tally/receipt"

// The JSON of POST /v1/polls/{poll}/votes (and of a vote on the live
// socket): the node's vote path decodes it and clients encode it.

// MaxBatch is the most votes one request may carry.
const MaxBatch = 10

// SessionHeader carries a voter token on a vote request.
const SessionHeader = "Tally-Session"

// Vote is one vote as a client sends it.
type Vote struct {
	Option string `json:"option"`
	Voter  string `json:"voter"`
	Idem   string `json:"idem"`
	// Name is a quiz participant's display name (1-32 bytes), shown on the
	// leaderboard; only for quiz answers.
	Name string `json:"name,omitempty"`
	// After is the newest Stamp the client was answered for this poll:
	// the node stamps this vote after it, so a change of mind sent to
	// another region, whose clock may be behind, still wins (docs/api.md).
	// Empty: the node's own ordering.
	After string `json:"after,omitempty"`
}

// VoteBatch is a request body of 1 to MaxBatch votes; a body may also be
// a single Vote.
type VoteBatch struct {
	Votes []Vote `json:"votes"`
}

// VoteResult is the acknowledgement of one vote.
type VoteResult struct {
	Idem   string `json:"idem"`
	Status string `json:"status"` // accepted, duplicate, late, rejected
	VoteID string `json:"vote_id,omitempty"`
	Error  string `json:"error,omitempty"`
	// ElapsedMs is a quiz answer's time as this node measured it
	// (docs/quiz.md); its score is shown once the question is revealed.
	ElapsedMs *int64 `json:"elapsed_ms,omitempty"`
	// Stamp is the hybrid-clock time the vote that counts for this key
	// was stamped with ("wall.logical"): a client sends the newest it
	// holds as the next vote's After.
	Stamp string `json:"stamp,omitempty"`
	// Receipt is the evidence of an accepted (or late) vote, signed by
	// the replica that ledgered it: the voter keeps it and, once the poll
	// is certified, checks it (GET /v1/polls/{poll}/proofs/{leaf};
	// docs/auditing.md, "Receipts").
	Receipt *receipt.Receipt `json:"receipt,omitempty"`
}

// Statuses of a VoteResult.
const (
	StatusAccepted  = "accepted"
	StatusDuplicate = "duplicate"
	StatusLate      = "late"
	StatusRejected  = "rejected"
)

// VoteResponse is the body of a successful vote request: one result per
// vote, in order.
type VoteResponse struct {
	Results    []VoteResult `json:"results"`
	ServerTime int64        `json:"server_time"`
}

// SessionResponse is the body of POST /v1/session: a challenge to solve
// (Status "challenge") or the token (Status "issued").
type SessionResponse struct {
	Status    string `json:"status"`
	Challenge string `json:"challenge,omitempty"`
	Bits      int    `json:"bits,omitempty"`
	Token     string `json:"token,omitempty"`
	Voter     string `json:"voter,omitempty"`
	ExpiresAt int64  `json:"expires_at,omitempty"`
	// ServerTime is the node's clock when it issued the token: a client
	// judges the token's age by it, not by its own clock (which may be
	// hours off, and would make it earn a new token at every tap).
	ServerTime int64 `json:"server_time,omitempty"`
}

// SessionSolution is the second POST /v1/session: the challenge and a
// nonce that solves it.
type SessionSolution struct {
	Challenge string `json:"challenge,omitempty"`
	Nonce     string `json:"nonce,omitempty"`
	// Previous is the token this client held before (refused for a new
	// network, or expired): the new token keeps its voter, so a person
	// whose phone changed network still counts once. One that does not
	// verify is passed over (a new voter).
	Previous string `json:"previous,omitempty"`
}
