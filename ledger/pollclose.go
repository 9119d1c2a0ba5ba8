package ledger

import (
	"fmt"
	"io"

	jsonv2 "github.com/go-json-experiment/json"

	"tally/ids"
)

// PollClose is the first line of an NDJSON export written by a node: how
// the poll it exports closes, as its certification reconciles it — the
// final close (records stamped at or after it are late) and whether each
// voter's first vote counts (a quiz question) rather than the last. An
// auditor's merge applies it, so the same command that merges the exports
// reproduces the certificate's digest. The line is not signed: the
// certificate's digest covers both values, so a wrong one cannot go
// unnoticed.
type PollClose struct {
	Poll      string `json:"poll"`
	ClosesAt  int64  `json:"closes_at"`
	FirstWins bool   `json:"first_wins,omitzero"`
	// CloseRule is the close rule certification applies (CloseByNode;
	// "" in exports written before 2026-12: the stamp rule).
	CloseRule string `json:"close_rule,omitzero"`
}

type pollCloseLine struct {
	Close *PollClose `json:"close"`
}

var pollClosePrefix = []byte(`{"close":`)

// WriteClose writes c as an export's close line.
func WriteClose(w io.Writer, c PollClose) error {
	b, err := jsonv2.Marshal(pollCloseLine{&c})
	if err != nil {
		return err
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("ledger: cannot write export: %w", err)
	}
	return nil
}

// decodeClose decodes a close line strictly.
func decodeClose(line []byte) (PollClose, error) {
	var l pollCloseLine
	if err := jsonv2.Unmarshal(line, &l, jsonv2.RejectUnknownMembers(true), jsonv2.MatchCaseInsensitiveNames(false)); err != nil || l.Close == nil {
		return PollClose{}, fmt.Errorf("%w: close line: %v", ErrMalformed, err)
	}
	if err := ids.Valid(l.Close.Poll); err != nil {
		return PollClose{}, fmt.Errorf("%w: close line: poll: %v", ErrMalformed, err)
	}
	if l.Close.ClosesAt <= 0 {
		return PollClose{}, fmt.Errorf("%w: close line: closes_at %d", ErrMalformed, l.Close.ClosesAt)
	}
	if r := l.Close.CloseRule; r != "" && r != CloseByNode {
		return PollClose{}, fmt.Errorf("%w: close line: close_rule %.32q (want %q)", ErrMalformed, r, CloseByNode)
	}
	return *l.Close, nil
}
