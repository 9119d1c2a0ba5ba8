package api

import "tally/poll"

// The JSON shapes of the API's poll and quiz resources, in one place: the
// node's handlers answer with them and clients (cmd/tally) decode them.
// A certified result's shape is api.ResultView.

// Page sizes of GET /v1/polls.
const (
	DefaultPageSize = 50
	MaxPageSize     = 200
)

// PollView is a poll as the API shows it: its definition, status and live
// tally.
type PollView struct {
	poll.Definition
	Status poll.Status `json:"status"`
	// Totals and Total are absent while the poll is hidden, except for
	// the admin.
	Totals     map[string]int64 `json:"totals,omitempty"`
	Total      *int64           `json:"total,omitempty"`
	ServerTime int64            `json:"server_time"`
	// Close is set in the answer to POST /v1/polls/{poll}/close only.
	Close *CloseReport `json:"close,omitempty"`
}

// CloseReport says, in the answer to a close, which full nodes confirmed
// they apply it — each had answered every vote it read under the old
// close, so none answers "accepted" under it any more — and which live
// full nodes did not within the wait: a region cut off goes on counting
// until it hears of the close, and its votes count as its node decided
// (docs/certification.md, "The close").
type CloseReport struct {
	Confirmed   []string `json:"confirmed"`             // replica ids, this node's included
	Unconfirmed []string `json:"unconfirmed,omitempty"` // replica ids
	TookMs      float64  `json:"took_ms"`
}

// ExtendRequest is the body of POST /v1/polls/{poll}/extend: exactly one
// of the new close time and the seconds to add to the current one.
type ExtendRequest struct {
	ClosesAt *int64   `json:"closes_at,omitempty"` // Unix ms
	ByS      *float64 `json:"by_s,omitempty"`
}

// CertifyRequest is the body of POST /v1/polls/{poll}/certify: certify
// without the replicas in Exclude, or with only the records the replicas
// in AcceptLost still hold (after a restore), for Reason (required with
// either).
type CertifyRequest struct {
	Exclude    []string `json:"exclude"`
	AcceptLost []string `json:"accept_lost"`
	Reason     string   `json:"reason"`
}

// PollPage is the body of GET /v1/polls: a page of polls, newest first,
// and the cursor of the next page ("" on the last).
type PollPage struct {
	Polls      []PollView `json:"polls"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// QuizView is a quiz as the API (GET /v1/quizzes/{quiz}) and the quiz's
// live stream show it.
type QuizView struct {
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
	// Status is ready (no question started), question (one is open),
	// between (the last one started is closed, more remain) or ended.
	Status    string         `json:"status"`
	Current   *int           `json:"current,omitempty"` // the index of the open question
	Started   int            `json:"started"`           // questions started (or skipped by the end) so far
	Total     int            `json:"total"`             // questions in all
	Questions []QuestionView `json:"questions"`         // the started ones; every one for the host
	// ServerTime lets a page count down to a question's closes_at.
	ServerTime int64 `json:"server_time"`
}

// QuestionView is one question of a QuizView.
type QuestionView struct {
	Index    int           `json:"index"`
	Poll     string        `json:"poll"`
	Text     string        `json:"text"`
	Options  []poll.Option `json:"options"`
	Status   poll.Status   `json:"status"`
	Started  bool          `json:"started"`
	Skipped  bool          `json:"skipped,omitempty"` // never asked: the quiz ended first (the host's view alone)
	OpensAt  int64         `json:"opens_at,omitempty"`
	ClosesAt int64         `json:"closes_at,omitempty"` // the deadline, by the server's clock
	LimitMs  int64         `json:"limit_ms"`
	Points   int64         `json:"points"`
	Revealed bool          `json:"revealed"`
	// Answers is how many answers the question has had (the live count,
	// across the regions heard from); the split by option stays hidden
	// until the reveal.
	Answers int64 `json:"answers"`
	// Correct and Totals are shown once the question is revealed (and
	// always to the host).
	Correct []string         `json:"correct,omitempty"`
	Totals  map[string]int64 `json:"totals,omitempty"`
}

// JoinView is the body of GET /v1/join/{code}: what a join code names
// (a poll, an event or a quiz), and the page a viewer goes to: the poll's,
// the event's current poll's, or the quiz's.
type JoinView struct {
	Code string `json:"code"`
	Kind string `json:"kind"` // poll, event or quiz
	ID   string `json:"id"`
	Poll string `json:"poll,omitempty"` // an event's current poll
	Path string `json:"path"`           // the page, from the site's root
}
