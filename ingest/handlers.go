package ingest

import (
	"cmp"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"tally/api"
	"tally/ids"
	"tally/ledger"
	"tally/poll"
	"tally/state"
)

// VoteResponse is the body of a successful vote request.
type VoteResponse struct {
	Results    []Result `json:"results"`
	ServerTime int64    `json:"server_time"`
}

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
	VoteResponse{Results: results, ServerTime: p.cfg.Now().UnixMilli()}.write(w)
}

// View returns the API view of a poll at the current time; admin says
// whether the host asks (and sees the counts of a hidden poll).
func (p *Pipeline) View(id string, admin bool) (api.PollView, error) {
	def, ok := p.cfg.State.Poll(id)
	now := p.cfg.Now().UnixMilli()
	if !ok || state.Parked(&def, now) && !admin { // a quiz question is the host's until started
		return api.PollView{}, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", id)
	}
	cert, ok := p.cfg.State.Certificate(id)
	reconciled := ok && cert.Status == state.Reconciled
	v := api.PollView{Definition: def, Status: def.StatusAt(now, reconciled), ServerTime: now}
	v.CloseStamp = nil // replication detail, not part of the API
	if def.Hidden && !admin {
		if v.Quiz != nil { // a question's answer stays secret until it is revealed
			q := *v.Quiz
			q.Correct = nil
			v.Quiz = &q
		}
		return v, nil
	}
	totals, total, err := p.cfg.State.Totals(id)
	if err != nil {
		return api.PollView{}, err
	}
	if reconciled {
		// The certified numbers, as the live stream's final frame shows
		// them: they may differ from the live counters (an excluded
		// replica, shadowed or late votes seen only at certification).
		for _, o := range def.Options {
			totals[o.ID] = int64(cert.Totals[o.ID])
		}
		total = int64(cert.Total)
	}
	v.Totals, v.Total = totals, &total
	return v, nil
}

// HandleCreatePoll serves POST /v1/polls (admin).
func (p *Pipeline) HandleCreatePoll(w http.ResponseWriter, r *http.Request) {
	var spec poll.Spec
	if err := api.DecodeJSON(w, r, p.cfg.Limits.MaxBody, &spec); err != nil {
		api.WriteError(w, err)
		return
	}
	ts, err := p.cfg.Clock.Now()
	if err != nil {
		api.WriteError(w, err)
		return
	}
	def, err := spec.Definition(ts.Wall)
	if err != nil {
		api.WriteError(w, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "%v", err))
		return
	}
	if _, exists := p.cfg.State.Poll(def.ID); exists {
		api.WriteError(w, api.Errorf(http.StatusConflict, api.CodeInvalidRequest, "poll %q exists", def.ID))
		return
	}
	if _, err := p.cfg.State.PutPoll(def, ts); err != nil {
		if errors.Is(err, state.ErrTooManyPolls) {
			err = api.Errorf(http.StatusConflict, api.CodeTooManyPolls, "this node holds as many polls as it may (--max-polls); closed polls leave after their certification and retention")
		}
		api.WriteError(w, err)
		return
	}
	p.writeView(w, r, http.StatusCreated, def.ID)
}

// HandleListPolls serves GET /v1/polls: newest first (by opens_at, then
// id, both descending), at most ?limit= polls (default 50, at most 200), continuing after
// ?cursor= (the next_cursor of the previous page). next_cursor is absent on
// the last page.
func (p *Pipeline) HandleListPolls(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		api.WriteError(w, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "malformed query: %v", err))
		return
	}
	limit := api.DefaultPageSize
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > api.MaxPageSize {
			api.WriteError(w, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "limit must be 1-%d", api.MaxPageSize))
			return
		}
		limit = n
	}
	polls := p.cfg.State.Polls()
	if ev := q.Get("event"); ev != "" {
		polls = slices.DeleteFunc(polls, func(d poll.Definition) bool { return d.Event != ev })
	}
	if !api.IsAdmin(r) { // quiz questions not started are the host's
		now := p.cfg.Now().UnixMilli()
		polls = slices.DeleteFunc(polls, func(d poll.Definition) bool { return state.Parked(&d, now) })
	}
	slices.Reverse(polls) // newest first
	if c := q.Get("cursor"); c != "" {
		after, ok := decodeCursor(c)
		if !ok {
			api.WriteError(w, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "malformed cursor"))
			return
		}
		// The first poll that sorts after the cursor's, newest first.
		i, _ := slices.BinarySearchFunc(polls, after, func(d poll.Definition, c pageKey) int {
			if x := cmp.Compare(c.opensAt, d.OpensAt); x != 0 {
				return x
			}
			return strings.Compare(c.id, d.ID)
		})
		if i < len(polls) && polls[i].OpensAt == after.opensAt && polls[i].ID == after.id {
			i++
		}
		polls = polls[i:]
	}
	out := map[string]any{}
	if len(polls) > limit {
		last := polls[limit-1]
		out["next_cursor"] = encodeCursor(pageKey{last.OpensAt, last.ID})
		polls = polls[:limit]
	}
	views := make([]api.PollView, 0, len(polls))
	for _, d := range polls {
		v, err := p.View(d.ID, api.IsAdmin(r))
		if err != nil {
			api.WriteError(w, err)
			return
		}
		views = append(views, v)
	}
	out["polls"] = views
	api.WriteJSON(w, http.StatusOK, out)
}

// pageKey is where a page of polls ends.
type pageKey struct {
	opensAt int64
	id      string
}

func encodeCursor(k pageKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(k.opensAt, 10) + "/" + k.id))
}

func decodeCursor(s string) (pageKey, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 128 {
		return pageKey{}, false
	}
	ms, id, ok := strings.Cut(string(b), "/")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || ids.Valid(id) != nil {
		return pageKey{}, false
	}
	return pageKey{n, id}, true
}

// HandleGetPoll serves GET /v1/polls/{poll}.
func (p *Pipeline) HandleGetPoll(w http.ResponseWriter, r *http.Request) {
	p.writeView(w, r, http.StatusOK, r.PathValue("poll"))
}

// HandleClosePoll serves POST /v1/polls/{poll}/close (admin): the poll
// closes now, unless it already closed earlier. The close is a newer write
// of the poll's definition, replicated like any other.
func (p *Pipeline) HandleClosePoll(w http.ResponseWriter, r *http.Request) {
	p.amend(w, r, func(def *poll.Definition, nowMs int64) (bool, error) {
		if nowMs >= def.ClosesAt {
			return false, nil
		}
		def.ClosesAt = max(nowMs, def.OpensAt+1)
		return true, nil
	})
}

// HandleLedger serves GET /v1/polls/{poll}/ledger (admin): this node's
// records for the poll as NDJSON, streamed.
func (p *Pipeline) HandleLedger(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("poll")
	if _, ok := p.cfg.State.Poll(id); !ok {
		api.WriteError(w, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", id))
		return
	}
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Now().Add(10 * time.Minute))
	// Headers are gone by the time an error could happen; a truncated
	// stream fails verification.
	if r.URL.Query().Get("format") == "binary" { // node to node, for certification
		w.Header().Set("Content-Type", ledger.StreamContentType)
		p.cfg.Ledger.ExportStream(w, id)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	p.cfg.Ledger.ExportSigned(w, id, p.cfg.SigningKey)
}

func (p *Pipeline) writeView(w http.ResponseWriter, r *http.Request, status int, id string) {
	// The admin endpoints (create, close, reveal, extend) are the host's.
	v, err := p.View(id, api.IsAdmin(r) || r.Method == http.MethodPost)
	if err != nil {
		api.WriteError(w, err)
		return
	}
	api.WriteJSON(w, status, v)
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
