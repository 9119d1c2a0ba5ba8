package ingest

import (
	"net/http"

	"tally/api"
	"tally/ledger"
	"tally/poll"
	"tally/quiz"
)

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

// answer measures and scores a quiz answer received at nowMs (this node's
// own clock, not the hybrid one), never from the client's clock: its time runs from
// when this node put the question on the client's socket, or, for a
// client it did not (an answer over HTTP), from when the question opened
// at this node (docs/quiz.md, Fairness).
func (p *Pipeline) answer(pollID string, q *poll.QuizQuestion, option string, nowMs int64, c Client) *ledger.Answer {
	opened := c.ShownMs
	if opened <= 0 {
		var ok bool
		if opened, ok = p.cfg.State.OpenedHere(pollID); !ok {
			opened = nowMs
		}
	}
	elapsed := min(max(nowMs-opened, 0), q.LimitMs)
	correct := false
	for _, o := range q.Correct {
		correct = correct || o == option
	}
	rtt := c.RTTMs
	if rtt < -1 || rtt > ledger.MaxRTTMs {
		rtt = -1
	}
	return &ledger.Answer{ElapsedMs: elapsed, Score: quiz.Score(correct, q.Points, elapsed, q.LimitMs), RTTMs: rtt}
}
