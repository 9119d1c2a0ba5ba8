package certify

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"tally/api"
	"tally/poll"
	"tally/quiz"
	"tally/state"
)

// HandleLeaderboard serves GET /v1/quizzes/{quiz}/leaderboard. Standings
// name participants by a keyed hash of their voter id, never the id (a
// voter id may be what lets one answer).
func (c *Certifier) HandleLeaderboard(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("quiz")
	top := 10
	if s := r.URL.Query().Get("top"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "top must be 1-100"))
			return
		}
		top = n
	}
	lb, err := c.Leaderboard(id, r.URL.Query().Get("participant"), top)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, http.StatusOK, lb)
}

// Leaderboard ranks the quiz's certified answers: the top standings and,
// when participant (a voter id) is given, theirs.
func (c *Certifier) Leaderboard(id, participant string, top int) (api.Leaderboard, error) {
	rk, err := c.Ranking(id)
	if err != nil {
		return api.Leaderboard{}, err
	}
	lb := api.Leaderboard{Quiz: id, Standings: rk.Top(top), Participants: len(rk.ranked), Counted: rk.Counted, Pending: rk.Pending,
		Final: rk.Final, Digest: rk.Digest}
	if participant != "" {
		if s, ok := rk.Of(participant); ok {
			lb.You = &s
		}
	}
	return lb, nil
}

// Ranking is a quiz's whole ranking at one moment. It is shared and must
// not be modified.
type Ranking struct {
	Counted []int  // question indexes whose certified answers are in
	Pending []int  // closed, and not certified or not revealed yet
	Final   bool   // every question closed and certified
	Digest  string // quiz.Digest of the whole ranking

	ranked    []quiz.Standing
	at        map[string]int // participant → index in ranked
	pseudonym func(voter string) string
}

// Participants is how many participants are ranked.
func (r *Ranking) Participants() int { return len(r.ranked) }

// Top returns the first n standings.
func (r *Ranking) Top(n int) []quiz.Standing {
	return append([]quiz.Standing{}, r.ranked[:min(max(n, 0), len(r.ranked))]...)
}

// Of returns a voter's standing, if they are ranked.
func (r *Ranking) Of(voter string) (quiz.Standing, bool) {
	i, ok := r.at[r.pseudonym(voter)]
	if !ok {
		return quiz.Standing{}, false
	}
	return r.ranked[i], true
}

// Ranking ranks the quiz's certified answers, or returns the ranking kept
// from the last call when no question's certificate has changed since.
func (c *Certifier) Ranking(id string) (*Ranking, error) {
	qs := c.cfg.State.Defs.QuizQuestions(id)
	if len(qs) == 0 {
		return nil, api.Errorf(http.StatusNotFound, api.CodeQuizNotFound, "no quiz %q", id)
	}
	now := c.cfg.Now().UnixMilli()
	rk := &Ranking{Counted: []int{}, Pending: []int{}, Final: true, pseudonym: c.pseudonym}
	// The ranking changes only when a question's certificate does: it is
	// kept per quiz under the certified digests it was computed from, so
	// the live stream can ask for it every tick.
	var key strings.Builder
	certs := make([]state.Certificate, len(qs))
	for i, d := range qs {
		// A question counts once certified and revealed: a score would
		// otherwise tell who was right before the host shows the answer.
		if cert, ok := c.cfg.State.Defs.Certificate(d.ID); ok && cert.Status == state.Reconciled && !d.Hidden {
			certs[i] = cert
			key.WriteString(d.ID + "=" + cert.Digest + ";")
		}
	}
	c.lbMu.Lock()
	cached, hit := c.lbCache[id]
	c.lbMu.Unlock()
	hit = hit && cached.key == key.String()
	var answers []quiz.Answer
	whole := true // every certificate's detail decoded: the ranking may be kept
	for i, d := range qs {
		cert := certs[i]
		if cert.Status != state.Reconciled {
			rk.Final = false
			if d.StatusAt(now, false) == poll.Closed {
				rk.Pending = append(rk.Pending, d.Quiz.Index)
			}
			continue
		}
		if hit {
			rk.Counted = append(rk.Counted, d.Quiz.Index) // ranked already
			continue
		}
		var detail api.ResultDetail
		if err := json.Unmarshal(cert.Detail, &detail); err != nil || detail.Result == nil {
			rk.Final, whole = false, false
			rk.Pending = append(rk.Pending, d.Quiz.Index)
			continue
		}
		rk.Counted = append(rk.Counted, d.Quiz.Index)
		for _, a := range detail.Result.Answers {
			answers = append(answers, quiz.Answer{Participant: c.pseudonym(a.Voter), Question: d.Quiz.Index, Option: a.Option,
				Correct: a.Score > 0, ElapsedMs: a.ElapsedMs, Score: a.Score, Name: a.Name})
		}
	}
	if hit {
		rk.ranked, rk.at, rk.Digest = cached.ranked, cached.at, cached.digest
		return rk, nil
	}
	rk.ranked = quiz.Rank(answers)
	rk.Digest = quiz.Digest(id, rk.Counted, rk.ranked)
	rk.at = make(map[string]int, len(rk.ranked))
	for i, s := range rk.ranked {
		rk.at[s.Participant] = i
	}
	if whole {
		c.lbMu.Lock()
		if c.lbCache == nil || len(c.lbCache) >= 64 { // a few quizzes at a time; the rest are recomputed
			c.lbCache = map[string]rankingCache{}
		}
		c.lbCache[id] = rankingCache{key: key.String(), ranked: rk.ranked, at: rk.at, digest: rk.Digest}
		c.lbMu.Unlock()
	}
	return rk, nil
}

// rankingCache is a quiz's ranking and the certificates it came from.
type rankingCache struct {
	key    string // question=digest; of the certified questions
	ranked []quiz.Standing
	at     map[string]int
	digest string
}

// pseudonym is Pseudonym.
func (c *Certifier) pseudonym(voter string) string { return c.Pseudonym(voter) }

// Pseudonym is how leaderboards and public quiz results name a
// participant: a hash of the voter id under the cluster's hash key (from
// the cluster name, so an auditor derives the same names), which does not
// give back the random voter ids that voter tokens carry.
func (c *Certifier) Pseudonym(voter string) string {
	return fmt.Sprintf("%016x", c.cfg.State.Hash(voter))
}
