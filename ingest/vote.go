package ingest

import (
	"tally/api"
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

// DecodeVotes parses a vote request body (api.DecodeVotes): the
// pipeline's decoder is the API's, which an edge runs before it relays.
func DecodeVotes(body []byte) ([]Vote, error) { return api.DecodeVotes(body) }
