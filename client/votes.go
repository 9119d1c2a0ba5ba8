package client

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"net/http"
	"strconv"

	"tally/api"
)

// NewKey returns a random 128-bit key in hex: an idempotency key for a
// vote (keep it and send it again on a retry) or an anonymous voter id.
func NewKey() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// Vote sends 1 to api.MaxBatch votes to the poll and returns one result
// per vote, in order. session is a voter token from Session ("" for
// none); when set, its voter replaces the votes'. A retry of a vote sends
// the same Idem: it is answered "duplicate" with the first vote's id and
// counts once.
func (c *Client) Vote(ctx context.Context, pollID, session string, votes ...api.Vote) ([]api.VoteResult, error) {
	if len(votes) == 0 || len(votes) > api.MaxBatch {
		return nil, fmt.Errorf("client: a vote request carries 1 to %d votes, not %d", api.MaxBatch, len(votes))
	}
	var body any = api.VoteBatch{Votes: votes}
	if len(votes) == 1 {
		body = votes[0]
	}
	header := http.Header{}
	if session != "" {
		header.Set(api.SessionHeader, session)
	}
	res, err := c.request(ctx, http.MethodPost, path("polls", pollID, "votes"), nil, body, header)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var v api.VoteResponse
	if err := decodeJSON(res, &v); err != nil {
		return nil, fmt.Errorf("client: POST %s: %w", path("polls", pollID, "votes"), err)
	}
	if len(v.Results) != len(votes) {
		return nil, fmt.Errorf("client: %d results for %d votes", len(v.Results), len(votes))
	}
	return v.Results, nil
}

// ErrPuzzle reports a proof-of-work puzzle the client would not solve.
var ErrPuzzle = errors.New("client: puzzle")

// MaxPuzzleBits is the hardest puzzle Session solves (about 2^28 hashes:
// seconds on one core).
const MaxPuzzleBits = 28

// Session earns a voter token from the node: it asks for one, solves the
// proof-of-work puzzle the node sets (docs/api.md, "Voter sessions"), and
// redeems the solution at the same node. The token is bound to this
// client's address and User-Agent (Options.UserAgent).
func (c *Client) Session(ctx context.Context) (api.SessionResponse, error) {
	var v api.SessionResponse
	if err := c.call(ctx, http.MethodPost, path("session"), nil, nil, &v); err != nil {
		return v, err
	}
	if v.Status == "issued" {
		return v, nil
	}
	if v.Status != "challenge" || v.Bits < 0 || v.Bits > MaxPuzzleBits {
		return v, fmt.Errorf("%w: status %q, %d bits (at most %d)", ErrPuzzle, v.Status, v.Bits, MaxPuzzleBits)
	}
	nonce, err := solve(ctx, v.Challenge, v.Bits)
	if err != nil {
		return v, err
	}
	var issued api.SessionResponse
	err = c.call(ctx, http.MethodPost, path("session"), nil, api.SessionSolution{Challenge: v.Challenge, Nonce: nonce}, &issued)
	return issued, err
}

// solve finds a decimal nonce with SHA-256(challenge ":" nonce) starting
// with want zero bits, checking ctx every 4096 tries.
func solve(ctx context.Context, challenge string, want int) (string, error) {
	buf := []byte(challenge + ":")
	prefix := len(buf)
	for n := uint64(0); ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return "", fmt.Errorf("%w: %w", ErrPuzzle, ctx.Err())
		}
		buf = strconv.AppendUint(buf[:prefix], n, 10)
		if leadingZeroBits(sha256.Sum256(buf)) >= want {
			return strconv.FormatUint(n, 10), nil
		}
	}
}

func leadingZeroBits(h [sha256.Size]byte) int {
	n := 0
	for _, b := range h {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}
