package ingest

import (
	"errors"
	"math/bits"
	"net/http"
	"net/netip"
	"time"

	"tally/api"
	"tally/session"
	"tally/state"
)

// SessionHeader carries a voter token on vote requests.
const SessionHeader = api.SessionHeader

// Sessions configures voter tokens. A nil Signer turns them off.
type Sessions struct {
	Signer  *session.Signer
	Require bool // votes without a token are refused (production)
	// PowBits is the base difficulty of the puzzle solved before a token
	// is issued; 0: no puzzle.
	PowBits int
	// TokensPerMinute bounds the tokens one address (its groups,
	// budget.go) obtains per minute across the cluster; 0:
	// DefaultTokensPerMinute.
	TokensPerMinute int
	// Vouched is how many of a group's tokens alive at once count (the
	// votes of later ones are shadowed); QuizVouched the same for a
	// quiz's answers (the leaderboard). 0: DefaultVouched,
	// DefaultQuizVouched.
	Vouched, QuizVouched int
	// Shared are networks many honest people share (a venue's Wi-Fi, a
	// carrier NAT the operator knows): their tokens are all vouched and
	// their addresses hold SharedScale hard limits.
	Shared []netip.Prefix
	// TTL is how long a token is good for; 0: DefaultSessionTTL. Give the
	// Signer the same.
	TTL time.Duration
	// VouchPace is how many vouched tokens this node hands one address
	// group a second, by the process clock (budget.go); ≤ 0: no pace.
	VouchPace float64
}

// The defaults of Sessions.
const (
	// DefaultSessionTTL is a token's life: a broadcast's, not a day's.
	DefaultSessionTTL = 4 * time.Hour
	// DefaultTokensPerMinute leaves a studio audience of 200 behind one
	// undeclared address a token each within a minute; the puzzle's cost
	// rises with the count.
	DefaultTokensPerMinute = 300
	// DefaultVouched keeps one address's weight under half a point of a
	// share at 3,000 voters (docs/operations.md, BENCHMARKS.md).
	DefaultVouched = 10
	// DefaultQuizVouched is how many participants of one address rank in
	// a quiz: too few to cover the answers' combinations.
	DefaultQuizVouched = 2
)

// sessionState is the pipeline's token bookkeeping.
type sessionState struct {
	cfg     Sessions
	shared  ranges
	used    session.Used
	pace    *limiter // vouched tokens per group (budget.go); nil: none
	paceNow func() time.Time
	budget  *state.Budgets // the tokens issued across the cluster
}

func newSessionState(cfg Sessions, budget *state.Budgets) *sessionState {
	if cfg.TokensPerMinute <= 0 {
		cfg.TokensPerMinute = DefaultTokensPerMinute
	}
	if cfg.Vouched <= 0 {
		cfg.Vouched = DefaultVouched
	}
	if cfg.QuizVouched <= 0 {
		cfg.QuizVouched = DefaultQuizVouched
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultSessionTTL
	}
	return &sessionState{cfg: cfg, shared: ranges(cfg.Shared), pace: newLimiter(cfg.VouchPace, 1), paceNow: time.Now, budget: budget}
}

// difficulty is the puzzle's bits for an address that obtained recent
// tokens in the sliding minute, across the cluster: the base, plus one
// more bit for every doubling beyond four (a phone on a shared address
// pays little; a script pays more each time).
func (s *sessionState) difficulty(recent int) int {
	return min(s.cfg.PowBits+min(bits.Len(uint(recent/4)), 8), session.MaxPowBits)
}

// SessionResponse is the answer: a token, or a puzzle to solve first.
type SessionResponse = api.SessionResponse

// HandleSession serves POST /v1/session: with proof of work on, the first
// call answers a signed puzzle and the second, carrying its solution, the
// token.
func (p *Pipeline) HandleSession(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.ContentLength != 0 {
		var err error
		if body, err = api.ReadBody(w, r, MaxSessionBody); err != nil {
			api.WriteError(w, r, err)
			return
		}
	}
	v, err := p.Session(body, api.HTTPSender(ClientIP(r, p.cfg.TrustedProxies), r.UserAgent(), "", 0))
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, http.StatusOK, v)
}

// MaxSessionBody bounds a session request's body (a puzzle's solution).
const MaxSessionBody = 1024

// Session answers a session request from s (over HTTP here, or relayed
// by an edge): the puzzle, or with its solution in body the token.
func (p *Pipeline) Session(body []byte, sender api.Sender) (SessionResponse, error) {
	s := p.sessions
	if s == nil {
		return SessionResponse{}, api.Errorf(http.StatusNotFound, api.CodeInvalidRequest, "voter sessions are off on this node")
	}
	if len(body) > MaxSessionBody {
		return SessionResponse{}, api.Errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "body larger than %d bytes", MaxSessionBody)
	}
	var req api.SessionSolution
	if len(body) > 0 {
		if err := api.Unmarshal(body, &req); err != nil {
			return SessionResponse{}, err
		}
	}
	ip := sender.IP
	client := session.ClientHash(ip, sender.UserAgent)
	now := p.cfg.Now()
	groups, shared := p.tokenGroups(ip), s.shared.contains(ip)
	if s.cfg.PowBits > 0 {
		if req.Challenge == "" {
			// Refused before any puzzle is set: no work for nothing.
			ok, wait, _, recent := p.sessions.tokenBudget(groups, shared, now)
			if !ok {
				p.m.sessions.WithLabelValues("rate_limited").Inc()
				return SessionResponse{}, rateLimited(wait, "too many voter tokens for this address across the cluster")
			}
			bits := s.difficulty(recent)
			ch, err := s.cfg.Signer.Challenge(bits, client)
			if err != nil {
				return SessionResponse{}, err
			}
			return SessionResponse{Status: "challenge", Challenge: ch, Bits: bits}, nil
		}
		// Paced now, before the solution is spent (and only a solution
		// that would be taken): a 429 here lets the client send the same
		// solution again after Retry-After.
		if err := s.cfg.Signer.Precheck(req.Challenge, req.Nonce, client, &s.used); err != nil {
			p.m.sessions.WithLabelValues("puzzle_refused").Inc()
			return SessionResponse{}, sessionError(err)
		}
		if _, wait, ok := p.sessions.reserveToken(groups, shared, p.cfg.Now(), true); !ok {
			p.m.sessions.WithLabelValues("rate_limited").Inc()
			return SessionResponse{}, rateLimited(wait, "too many voter tokens for this address across the cluster; send the same solution again after Retry-After")
		}
		if err := s.cfg.Signer.Check(req.Challenge, req.Nonce, client, &s.used); err != nil {
			p.m.sessions.WithLabelValues("puzzle_refused").Inc()
			return SessionResponse{}, sessionError(err)
		}
		p.m.sessions.WithLabelValues("puzzle_solved").Inc()
	}
	slot, wait, ok := p.sessions.reserveToken(groups, shared, p.cfg.Now(), false)
	if !ok {
		p.m.sessions.WithLabelValues("rate_limited").Inc()
		return SessionResponse{}, rateLimited(wait, "too many voter tokens for this address across the cluster")
	}
	tok, t, err := p.issue(req.Previous, client, slot)
	if err != nil {
		return SessionResponse{}, err
	}
	if slot > s.cfg.Vouched {
		p.m.sessions.WithLabelValues("issued_unvouched").Inc()
	} else {
		p.m.sessions.WithLabelValues("issued").Inc()
	}
	return SessionResponse{Status: "issued", Token: tok, Voter: t.Voter, ExpiresAt: t.Issued.Add(s.cfg.TTL).UnixMilli(), ServerTime: t.Issued.UnixMilli()}, nil
}

// MaxPreviousAge bounds the age of a voter id that a previous token
// passes to a new one, counted from the id's first issue however often it
// was passed on since: a day holds any broadcast, and a token leaked from
// an old show no longer speaks for its voter.
const MaxPreviousAge = 24 * time.Hour

// issue signs a new token for client: for the voter of previous when it is
// a token of this cluster (the same person on a new network), otherwise
// for a new voter.
func (p *Pipeline) issue(previous string, client [8]byte, slot int) (string, session.Token, error) {
	s := p.sessions
	pow := s.cfg.PowBits > 0
	if previous != "" {
		if voter, since, err := s.cfg.Signer.VoterOf(previous); err == nil && p.cfg.Now().Sub(since) <= MaxPreviousAge {
			p.m.sessions.WithLabelValues("reissued").Inc()
			return s.cfg.Signer.IssueFor(voter, since, client, pow, slot)
		}
	}
	return s.cfg.Signer.Issue(client, pow, slot)
}

// voterOf resolves the token of a vote request, checked against the
// client; the zero Token when none is given and none is needed (the
// body's voter stands) — unless tokens are required.
func (p *Pipeline) voterOf(tok, userAgent, ip string, public bool) (session.Token, error) {
	s := p.sessions
	switch {
	case s == nil:
		return session.Token{}, nil
	case tok == "" && (s.cfg.Require || public):
		return session.Token{}, api.Errorf(http.StatusUnauthorized, api.CodeSessionRequired, "votes need a voter token: POST /v1/session, then send it in the %s header (over the WebSocket: in the vote message's \"token\")", SessionHeader)
	case tok == "":
		return session.Token{}, nil
	}
	t, err := s.cfg.Signer.Verify(tok, session.ClientHash(ip, userAgent))
	if err != nil {
		return session.Token{}, sessionError(err)
	}
	if public && !t.PoW {
		return session.Token{}, api.Errorf(http.StatusUnauthorized, api.CodeSessionRequired, "this poll is public: its votes need a token earned by solving the puzzle")
	}
	return t, nil
}

// sessionError maps session errors to API errors, one code each.
func sessionError(err error) error {
	switch {
	case errors.Is(err, session.ErrExpired):
		return api.Errorf(http.StatusUnauthorized, api.CodeSessionExpired, "%v", err)
	case errors.Is(err, session.ErrMismatch):
		return api.Errorf(http.StatusUnauthorized, api.CodeSessionMismatch, "%v: get a new one from this device and network", err)
	case errors.Is(err, session.ErrOtherIssuer):
		return api.Errorf(http.StatusForbidden, api.CodePuzzleFailed, "%v: ask this node for a new challenge", err)
	case errors.Is(err, session.ErrBadSolution), errors.Is(err, session.ErrReplayed):
		return api.Errorf(http.StatusForbidden, api.CodePuzzleFailed, "%v", err)
	case errors.Is(err, session.ErrBadChallenge), errors.Is(err, session.ErrChallengeExpired):
		return api.Errorf(http.StatusForbidden, api.CodePuzzleFailed, "%v: ask this node for a new challenge", err)
	}
	return api.Errorf(http.StatusUnauthorized, api.CodeSessionInvalid, "%v", err)
}

// Participant checks the voter token a quiz stream's join carries (the
// fan-out's Config.Participant): it returns the token's voter (""
// without a valid token: the join's own name stands) and whether the
// participant counts among the quiz's joined — as their answers would
// rank at best: a valid token within its address's quiz budget, or any
// join on a node that issues no tokens. A join without a token, or with a
// bad one, does not count even where answers may come without one: the
// number goes on air, and a script could name participants by the
// thousand for free.
func (p *Pipeline) Participant(tok, userAgent, ip string) (voter string, counted bool) {
	s := p.sessions
	if s == nil {
		return "", true
	}
	if tok == "" {
		return "", false
	}
	t, err := s.cfg.Signer.Verify(tok, session.ClientHash(ip, userAgent))
	if err != nil {
		return "", false
	}
	return t.Voter, !p.sessions.overBudget(t.Slot, true)
}
