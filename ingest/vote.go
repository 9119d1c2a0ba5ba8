package ingest

import (
	"net/http"

	"tally/api"
	"tally/ids"
	"tally/ledger"
)

// MaxBatch is the most votes one request may carry.
const MaxBatch = api.MaxBatch

// The vote's JSON types are the API's (package api), shared with clients.
type (
	Vote         = api.Vote
	Result       = api.VoteResult
	VoteResponse = api.VoteResponse
)

// Statuses of a Result.
const (
	StatusAccepted  = api.StatusAccepted
	StatusDuplicate = api.StatusDuplicate
	StatusLate      = api.StatusLate
	StatusRejected  = api.StatusRejected
)

// voteBody is the request body: one vote, or a batch under "votes".
type voteBody struct {
	Option string  `json:"option"`
	Voter  string  `json:"voter"`
	Idem   string  `json:"idem"`
	Name   string  `json:"name"`
	After  string  `json:"after"`
	Votes  *[]Vote `json:"votes"`
}

// DecodeVotes parses a vote request body: either one vote
// {"option","voter","idem"} or {"votes":[…]} with 1–MaxBatch votes, each
// with a well-formed voter, idempotency key and option. Errors are
// *api.Error values (400) naming what is wrong.
func DecodeVotes(body []byte) ([]Vote, error) {
	var b voteBody
	if err := api.Unmarshal(body, &b); err != nil {
		return nil, err
	}
	var votes []Vote
	if b.Votes != nil {
		if b.Option != "" || b.Voter != "" || b.Idem != "" || b.Name != "" || b.After != "" {
			return nil, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "send one vote or a \"votes\" batch, not both")
		}
		votes = *b.Votes
		if len(votes) == 0 {
			return nil, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "empty batch")
		}
		if len(votes) > MaxBatch {
			return nil, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "a batch holds at most %d votes, got %d", MaxBatch, len(votes))
		}
	} else {
		votes = []Vote{{Option: b.Option, Voter: b.Voter, Idem: b.Idem, Name: b.Name, After: b.After}}
	}
	for i, v := range votes {
		for _, f := range []struct {
			name, value string
			max         int
		}{{"voter", v.Voter, ledger.MaxVoterLen}, {"idem", v.Idem, ledger.MaxIdemLen}, {"option", v.Option, ledger.MaxOptionLen}} {
			if err := ledger.ValidText(f.value, f.max); err != nil {
				return nil, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "vote %d: %s %v", i, f.name, err)
			}
		}
		if v.After != "" {
			if _, _, ok := api.ParseStamp(v.After); !ok {
				return nil, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "vote %d: after: want a stamp \"wall.logical\" as a vote's answer gives it", i)
			}
		}
		if v.Name != "" {
			if err := ids.DisplayText(v.Name, ledger.MaxNameLen); err != nil {
				return nil, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "vote %d: name %v", i, err)
			}
		}
	}
	return votes, nil
}
