package ingest

import (
	"net/http"

	"tally/api"
	"tally/ledger"
	"tally/poll"
	"tally/quiz"
)

// NameFilter decides whether a quiz participant's display name may be
// shown on the leaderboard or in a quiz's lobby: a profanity list, a
// moderation service. The node's is Config.Names; nil allows every
// well-formed name (ledger.ValidName: 1-40 characters, something visible,
// no control or invisible format character).
type NameFilter interface {
	Allow(name string) bool
}

// checkNames refuses display names on votes of a poll, and names the
// filter does not allow on a quiz question's answers.
func (p *Pipeline) checkNames(def *poll.Definition, votes []Vote) error {
	for _, v := range votes {
		switch {
		case v.Name == "":
		case def.Quiz == nil:
			return api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "a name goes with a quiz answer, not a vote")
		case p.cfg.Names != nil && !p.cfg.Names.Allow(v.Name):
			return api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "the name %q is not allowed here; choose another", v.Name)
		}
	}
	return nil
}

// answerKey names one participant's answer in flight at this node.
type answerKey struct {
	poll  string
	voter uint64
}

// reserveAnswer admits a participant's answer to a quiz question: refused
// with already_answered when an answer of theirs is known (its ballot,
// from this node or another region) or is being ledgered at this node
// right now. release ends the reservation once the answer is counted, so
// its ballot answers from then on.
func (p *Pipeline) reserveAnswer(pollID string, voter uint64) (release func(), err error) {
	k := answerKey{pollID, voter}
	p.answersMu.Lock()
	defer p.answersMu.Unlock()
	if _, busy := p.answering[k]; busy || p.cfg.State.Answered(pollID, voter) {
		return nil, api.Errorf(http.StatusConflict, api.CodeAlreadyAnswered, "this participant has answered question %q; the first answer stands", pollID)
	}
	p.answering[k] = struct{}{}
	return func() {
		p.answersMu.Lock()
		delete(p.answering, k)
		p.answersMu.Unlock()
	}, nil
}

// answer times and scores a quiz answer received at nowMs (this node's
// own clock, not the hybrid one) by the quiz clock (quiz.Elapsed), from
// the moments this node recorded.
func (p *Pipeline) answer(pollID string, opensAt int64, q *poll.QuizQuestion, v Vote, voter uint64, nowMs int64, c Client) *ledger.Answer {
	option := v.Option
	m := quiz.Moments{Shown: c.ShownMs, OpensAt: opensAt, Received: nowMs}
	if m.Shown <= 0 {
		m.Shown, _ = p.cfg.State.OpenedHere(pollID)
	}
	m.FirstShown, _ = p.cfg.State.FirstShown(pollID, voter)
	elapsed := quiz.Elapsed(m, q.LimitMs)
	correct := false
	for _, o := range q.Correct {
		correct = correct || o == option
	}
	rtt := c.RTTMs
	if rtt < -1 || rtt > ledger.MaxRTTMs {
		rtt = -1
	}
	return &ledger.Answer{ElapsedMs: elapsed, Score: quiz.Score(correct, q.Points, elapsed, q.LimitMs), RTTMs: rtt, Name: v.Name}
}
