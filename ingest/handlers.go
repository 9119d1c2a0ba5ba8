package ingest

import (
	"net/http"

	"tally/api"
)

// HandleVotes serves POST /v1/polls/{poll}/votes.
func (p *Pipeline) HandleVotes(w http.ResponseWriter, r *http.Request) {
	received := p.cfg.Now().UnixMilli() // a quiz answer's time ends here, not after the queues
	body, err := api.ReadBody(w, r, p.cfg.Limits.MaxBody)
	if err != nil {
		p.m.refused(err, 1)
		api.WriteError(w, r, err)
		return
	}
	s := api.HTTPSender(ClientIP(r, p.cfg.TrustedProxies), r.UserAgent(), r.Header.Get(SessionHeader), received)
	v, err := p.vote(r.PathValue("poll"), body, s)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	writeVoteResponse(w, v)
}

// Vote takes a vote request body from another transport (the live
// socket): the same decoding, voter token check, pipeline and
// acknowledgement as HandleVotes. It is fanout's Voter.
func (p *Pipeline) Vote(pollID string, body []byte, s api.Sender) (VoteResponse, error) {
	if err := p.Fits(body); err != nil {
		p.m.refused(err, 1)
		return VoteResponse{}, err
	}
	return p.vote(pollID, body, s)
}

// Fits refuses a vote request body larger than the pipeline takes. The
// node's relay server calls it too: it refuses (and counts) an oversized
// relayed request before the batch (VoteBatch does not count that
// refusal).
func (p *Pipeline) Fits(body []byte) error {
	if int64(len(body)) > p.cfg.Limits.MaxBody {
		return api.Errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "body larger than %d bytes", p.cfg.Limits.MaxBody)
	}
	return nil
}

// vote decodes a vote request body, checks the sender's voter token (bound
// to its address and User-Agent; its voter replaces the body's) and
// submits the votes.
func (p *Pipeline) vote(pollID string, body []byte, s api.Sender) (VoteResponse, error) {
	votes, client, _, err := p.decode(pollID, body, s)
	if err != nil {
		return VoteResponse{}, err
	}
	results, err := p.submit(pollID, votes, client)
	if err != nil {
		return VoteResponse{}, err
	}
	return VoteResponse{Results: results, ServerTime: p.cfg.Now().UnixMilli()}, nil
}

// decode reads a request's votes and checks its sender's voter token
// (bound to its address and User-Agent; its voter replaces the body's).
// It counts its refusals in tally_votes_total, as observe counts the
// pipeline's: a body that is not votes as one vote, a refused token as
// the request's votes. Every transport's votes pass here once (HTTP, the
// live socket, an edge's relay).
func (p *Pipeline) decode(pollID string, body []byte, s api.Sender) ([]Vote, Client, pollRead, error) {
	votes, err := DecodeVotes(body)
	if err != nil {
		p.m.refused(err, 1)
		return nil, Client{}, pollRead{}, err
	}
	return p.sender(pollID, votes, s)
}

// sender checks the sender's voter token for votes already decoded (by
// decode, or by the edge that relayed them) and puts its voter in them.
func (p *Pipeline) sender(pollID string, votes []Vote, s api.Sender) ([]Vote, Client, pollRead, error) {
	def := readPoll(p.cfg.State, pollID)
	tok, err := p.voterOf(s.Token, s.UserAgent, s.IP, def.def.Public)
	if err != nil {
		p.m.refused(err, len(votes))
		return nil, Client{}, pollRead{}, err
	}
	client := Client{Sender: s, TokenAge: -1}
	if tok.Voter != "" {
		for i := range votes {
			votes[i].Voter = tok.Voter // the token's voter, whatever the body says
		}
		client.TokenAge, client.TokenSlot = p.cfg.Now().Sub(tok.Issued), tok.Slot
	}
	return votes, client, def, nil
}
