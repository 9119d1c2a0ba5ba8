package api

import (
	"net/http"

	"tally/ledger"
)

// Bounds of a vote's fields, as the ledger keeps them.
const (
	MaxVoterLen  = ledger.MaxVoterLen
	MaxIdemLen   = ledger.MaxIdemLen
	MaxOptionLen = ledger.MaxOptionLen
	MaxNameLen   = ledger.MaxNameLen
	MaxNameRunes = ledger.MaxNameRunes
)

// CheckName checks a participant's display name, on an answer or a quiz
// join: 1–MaxNameRunes characters (at most MaxNameLen bytes), printable,
// with no invisible format character (no bidi control can make it read
// as another name). Its error is a 400 naming the field.
func CheckName(name string) error {
	if err := ledger.ValidName(name); err != nil {
		return Errorf(http.StatusBadRequest, CodeInvalidRequest, "name %v", err)
	}
	return nil
}

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
// with a well-formed voter, idempotency key and option (CheckVotes).
// Errors are *Error values (400) naming what is wrong. Where a vote is
// decoded — a full node's HTTP and live socket, an edge before it relays
// the votes in binary (package relay) — it is decoded by this.
func DecodeVotes(body []byte) ([]Vote, error) {
	var b voteBody
	if err := Unmarshal(body, &b); err != nil {
		return nil, err
	}
	var votes []Vote
	if b.Votes != nil {
		if b.Option != "" || b.Voter != "" || b.Idem != "" || b.Name != "" || b.After != "" {
			return nil, Errorf(http.StatusBadRequest, CodeInvalidRequest, "send one vote or a \"votes\" batch, not both")
		}
		votes = *b.Votes
	} else {
		votes = []Vote{{Option: b.Option, Voter: b.Voter, Idem: b.Idem, Name: b.Name, After: b.After}}
	}
	if err := CheckVotes(votes); err != nil {
		return nil, err
	}
	return votes, nil
}

// CheckVotes checks a request's votes, however they came: 1–MaxBatch of
// them, each with a well-formed voter, idempotency key and option, a
// display name and an After stamp well-formed where given. A full node
// checks the votes an edge relays in binary with it too.
func CheckVotes(votes []Vote) error {
	if len(votes) == 0 {
		return Errorf(http.StatusBadRequest, CodeInvalidRequest, "empty batch")
	}
	if len(votes) > MaxBatch {
		return Errorf(http.StatusBadRequest, CodeInvalidRequest, "a batch holds at most %d votes, got %d", MaxBatch, len(votes))
	}
	for i, v := range votes {
		for _, f := range [...]struct {
			name, value string
			max         int
		}{{"voter", v.Voter, MaxVoterLen}, {"idem", v.Idem, MaxIdemLen}, {"option", v.Option, MaxOptionLen}} {
			if err := ledger.ValidText(f.value, f.max); err != nil {
				return Errorf(http.StatusBadRequest, CodeInvalidRequest, "vote %d: %s %v", i, f.name, err)
			}
		}
		if v.After != "" {
			if _, _, ok := ParseStamp(v.After); !ok {
				return Errorf(http.StatusBadRequest, CodeInvalidRequest, "vote %d: after: want a stamp \"wall.logical\" as a vote's answer gives it", i)
			}
		}
		if v.Name != "" {
			if err := CheckName(v.Name); err != nil {
				return Errorf(http.StatusBadRequest, CodeInvalidRequest, "vote %d: %s", i, err.(*Error).Message)
			}
		}
	}
	return nil
}
