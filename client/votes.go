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
	"slices"
	"strconv"
	"sync"
	"time"

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
//
// Each vote without an After carries the newest stamp this client was
// answered for the same voter (the session, else the vote's voter) in
// the poll, so the node stamps it after the votes the voter was told of,
// whatever region takes it; the answers' stamps are kept (never an older
// one), and a stamp the node refuses (400 stamp_ahead) is dropped. An
// answer 504 outcome_unknown is followed by the same request (same body,
// same keys) after its Retry-After until a definitive answer, for
// Options.UnknownWait at most; then the error matches ErrOutcomeUnknown.
func (c *Client) Vote(ctx context.Context, pollID, session string, votes ...api.Vote) ([]api.VoteResult, error) {
	if len(votes) == 0 || len(votes) > api.MaxBatch {
		return nil, fmt.Errorf("client: a vote request carries 1 to %d votes, not %d", api.MaxBatch, len(votes))
	}
	votes = slices.Clone(votes)
	keys := make([]stampKey, len(votes))
	for i := range votes {
		keys[i] = stampKey{poll: pollID, voter: voterKey(session, votes[i].Voter)}
		if votes[i].After == "" {
			votes[i].After = c.stamps.get(keys[i])
		}
	}
	var body any = api.VoteBatch{Votes: votes}
	if len(votes) == 1 {
		body = votes[0]
	}
	header := http.Header{}
	if session != "" {
		header.Set(api.SessionHeader, session)
	}
	res, err := c.settle(ctx, path("polls", pollID, "votes"), body, header)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Code == api.CodeStampAhead {
			for _, k := range keys {
				c.stamps.drop(k)
			}
		}
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
	for i, r := range v.Results {
		c.stamps.keep(keys[i], r.Stamp)
	}
	return v.Results, nil
}

// settle posts body to p, and again (the same body) after Retry-After
// while the answer is 504 outcome_unknown, for Options.UnknownWait. After
// an unknown outcome a 503 is not definitive either — the node answering
// it may not know yet what another did with the first request — and is
// waited out the same way (as the JavaScript client does); an outcome
// still not known by then is ErrOutcomeUnknown.
func (c *Client) settle(ctx context.Context, p string, body any, header http.Header) (*http.Response, error) {
	deadline := time.Now().Add(c.opts.UnknownWait)
	for sawUnknown := false; ; sawUnknown = true {
		res, err := c.request(ctx, http.MethodPost, p, nil, body, header)
		if err == nil || c.opts.UnknownWait < 0 || !errors.Is(err, ErrOutcomeUnknown) && !(sawUnknown && errors.Is(err, ErrUnavailable)) {
			return res, err
		}
		var e *Error
		errors.As(err, &e)
		wait := min(max(e.RetryAfter, time.Second), 10*time.Second)
		if time.Now().Add(wait).After(deadline) {
			return nil, fmt.Errorf("client: no definitive answer within %v, the vote may or may not have been counted: %w (last: %w)", c.opts.UnknownWait, ErrOutcomeUnknown, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("client: %w (the outcome is unknown: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// stampKey names whose stamp: a voter (a session token, or the vote's
// voter id without one) in a poll.
type stampKey struct{ poll, voter string }

func voterKey(session, voter string) string {
	if session != "" {
		return "s:" + session
	}
	return "v:" + voter
}

// maxStamps bounds the stamps a client keeps; past it one is forgotten
// (its voter's next vote is ordered by the node's clock alone).
const maxStamps = 1 << 16

// stamps is the newest stamp of each voter's answers per poll.
type stamps struct {
	mu sync.Mutex
	m  map[stampKey]string
}

func (s *stamps) get(k stampKey) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k]
}

// keep holds stamp for k unless it holds a later one.
func (s *stamps) keep(k stampKey, stamp string) {
	if stamp == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[stampKey]string{}
	}
	if _, ok := s.m[k]; !ok && len(s.m) >= maxStamps {
		for old := range s.m {
			delete(s.m, old)
			break
		}
	}
	if later := api.LaterStamp(s.m[k], stamp); later != "" {
		s.m[k] = later
	}
}

func (s *stamps) drop(k stampKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
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
