package api

import (
	"net/http"

	"tally/ledger"
	"tally/names"
)

// Bounds of a vote's fields, as the ledger keeps them.
const (
	MaxVoterLen  = ledger.MaxVoterLen
	MaxIdemLen   = ledger.MaxIdemLen
	MaxOptionLen = ledger.MaxOptionLen
	MaxNameLen   = ledger.MaxNameLen
	MaxNameRunes = ledger.MaxNameRunes
)

// NormalName takes a participant's display name, on an answer or a quiz
// join: it returns the name in its normal form (names.Normalize: the
// Nickname profile's spaces and NFKC, so styled letters such as 𝐀,
// Ａ or Ⓐ are the A they style), which is what is vetted, compared,
// ledgered and shown, once it is a well-formed name (ledger.ValidName:
// 1–MaxNameRunes characters in at most MaxNameLen bytes, printable, no
// invisible format character). Its error is a 400 naming the field.
func NormalName(name string) (string, error) {
	if len(name) > maxRawName {
		return "", Errorf(http.StatusBadRequest, CodeInvalidRequest, "name is longer than %d bytes", MaxNameLen)
	}
	n := names.Normalize(name)
	if err := ledger.ValidName(n); err != nil {
		return "", Errorf(http.StatusBadRequest, CodeInvalidRequest, "name %v", err)
	}
	return n, nil
}

// maxRawName bounds a name before its normal form, which can be shorter
// (decomposed letters composed, spaces collapsed).
const maxRawName = 4 * MaxNameLen

// LookAlikeName is the refusal of a display name that looks like another
// participant's in the same quiz (state.ErrLookAlike).
func LookAlikeName(name string) *Error {
	return Errorf(http.StatusBadRequest, CodeInvalidRequest, "the name %q looks like another participant's name in this quiz; choose another", name)
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
// display name and an After stamp well-formed where given; it puts each
// display name in its normal form (NormalName), in place. A full node
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
			name, err := NormalName(v.Name)
			if err != nil {
				return Errorf(http.StatusBadRequest, CodeInvalidRequest, "vote %d: %s", i, err.(*Error).Message)
			}
			votes[i].Name = name
		}
	}
	return nil
}
