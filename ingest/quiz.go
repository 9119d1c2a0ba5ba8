package ingest

import (
	"errors"
	"net/http"

	"tally/api"
	"tally/ledger"
	"tally/poll"
	"tally/quiz"
	"tally/state"
)

// NameFilter decides whether a quiz participant's display name may be
// shown on the leaderboard or in a quiz's lobby: a profanity list, a
// moderation service. The node's is Config.Names; nil allows every
// well-formed name (ledger.ValidName: 1-40 characters, something visible,
// no control or invisible format character). Allow is given the name in
// its normal form (api.NormalName: NFKC, so "𝐟𝐮𝐜𝐤", "ｆｕｃｋ" and "ⓕⓤⓒⓚ"
// arrive as "fuck"), the form that is ledgered and shown; a filter that
// also wants its words spelt with other scripts' look-alike letters
// compares names.Skeleton of both.
type NameFilter interface {
	Allow(name string) bool
}

// checkNames refuses display names on votes of a poll; on a quiz
// question's answers it puts each name in its normal form, in place, and
// refuses a name the filter does not allow or that looks like another
// participant's in the quiz (state.Names.Check). The name is kept as the
// voter's once the answer is ledgered (keepName): a refused answer
// changes nothing.
func (p *Pipeline) checkNames(def *poll.Definition, votes []Vote) error {
	for i, v := range votes {
		if v.Name == "" {
			continue
		}
		if def.Quiz == nil {
			return api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "a name goes with a quiz answer, not a vote")
		}
		name, err := api.NormalName(v.Name) // again: a vote may come from Submit, not decoded here
		if err != nil {
			return err
		}
		if p.cfg.Names != nil && !p.cfg.Names.Allow(name) {
			return api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "the name %q is not allowed here; choose another", name)
		}
		if err := p.cfg.State.Names.Check(def.Quiz.Quiz, v.Voter, name); errors.Is(err, state.ErrLookAlike) {
			return api.LookAlikeName(name)
		} else if err != nil {
			return err
		}
		votes[i].Name = name
	}
	return nil
}

// keepName keeps a ledgered answer's display name as its voter's among
// its quiz's names (state.Names.Claim), so that a look-alike is refused
// from then on; checkNames checked it. Of two look-alikes checked at
// once, the first kept stays.
func keepName(st *state.State, pollID string, r *ledger.Record) {
	if r.Answer == nil || r.Answer.Name == "" {
		return
	}
	if def, ok := st.Defs.Poll(pollID); ok && def.Quiz != nil {
		_ = st.Names.Claim(def.Quiz.Quiz, r.Voter, r.Answer.Name)
	}
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
