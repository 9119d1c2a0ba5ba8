package ingest

import (
	"net/http"
	"time"

	"tally/api"
)

// HandleVotes serves POST /v1/polls/{poll}/votes.
func (p *Pipeline) HandleVotes(w http.ResponseWriter, r *http.Request) {
	received := p.cfg.Now().UnixMilli() // a quiz answer's time ends here, not after the queues
	body, err := api.ReadBody(w, r, p.cfg.Limits.MaxBody)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	votes, err := DecodeVotes(body)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	ip := ClientIP(r, p.cfg.TrustedProxies)
	def, _ := p.cfg.State.Poll(r.PathValue("poll"))
	tok, err := p.voterOf(r.Header.Get(SessionHeader), r.UserAgent(), ip, def.Public)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	client := Client{IP: ip, TokenAge: -1, SocketAge: -1, RTTMs: -1, ReceivedMs: received}
	if tok.Voter != "" { // the token's voter, whatever the body says
		for i := range votes {
			votes[i].Voter = tok.Voter
		}
		client.TokenAge, client.TokenSlot = p.cfg.Now().Sub(tok.Issued), tok.Slot
	}
	results, err := p.SubmitFrom(r.PathValue("poll"), votes, client)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	writeVoteResponse(w, VoteResponse{Results: results, ServerTime: p.cfg.Now().UnixMilli()})
}

// Socket is what the transport knows of a socket a vote came on.
type Socket struct {
	IP, UserAgent string
	Token         string        // the voter token the message carried; "" if none
	Connected     time.Duration // how long the socket has been open
	ShownMs       int64         // when the question was put on it (Unix ms); 0: not yet
	RTTMs         int64         // its last round trip; -1: not measured
	ReceivedMs    int64         // when the message was read off it (Unix ms); 0: not known
}

// Vote takes a vote request body from another transport (the WebSocket):
// the same decoding, voter token check, pipeline and acknowledgement as
// HandleVotes.
func (p *Pipeline) Vote(pollID string, body []byte, s Socket) (any, error) {
	ip, userAgent, token, connected := s.IP, s.UserAgent, s.Token, s.Connected
	if int64(len(body)) > p.cfg.Limits.MaxBody {
		return nil, api.Errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "body larger than %d bytes", p.cfg.Limits.MaxBody)
	}
	votes, err := DecodeVotes(body)
	if err != nil {
		return nil, err
	}
	// The token travels in the vote message and is checked as the HTTP
	// header is: bound to this client (IP and the socket's User-Agent).
	def, _ := p.cfg.State.Poll(pollID)
	tok, err := p.voterOf(token, userAgent, ip, def.Public)
	if err != nil {
		return nil, err
	}
	client := Client{IP: ip, TokenAge: -1, SocketAge: connected, ShownMs: s.ShownMs, RTTMs: s.RTTMs, ReceivedMs: s.ReceivedMs}
	if tok.Voter != "" {
		for i := range votes {
			votes[i].Voter = tok.Voter // the token's voter, whatever the body says
		}
		client.TokenAge, client.TokenSlot = p.cfg.Now().Sub(tok.Issued), tok.Slot
	}
	results, err := p.SubmitFrom(pollID, votes, client)
	if err != nil {
		return nil, err
	}
	return VoteResponse{Results: results, ServerTime: p.cfg.Now().UnixMilli()}, nil
}
