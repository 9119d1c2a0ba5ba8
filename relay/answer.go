package relay

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"tally/api"
	"tally/internal/wire"
)

// Answer is a full node's answer to one Request, one typed value from the
// full node's pipeline to the edge's client: exactly one of Err, Vote,
// Session and Join is set. It crosses the relay in binary (AppendAnswers);
// only the edge writes it as JSON (WriteHTTP), as the full node would have.
type Answer struct {
	Err     *api.Error // a refusal, with its status, code and Retry-After
	Vote    *api.VoteResponse
	Session *api.SessionResponse
	Join    *JoinAnswer
}

// JoinAnswer is a full node's answer to a KindJoin request.
type JoinAnswer struct {
	// Voter is the token's voter; empty: no valid token (the participant
	// joins under the id they sent, and counts only where the full node
	// asks for no tokens: Counted).
	Voter   string `json:"voter"`
	Counted bool   `json:"counted"`
}

// ErrorAnswer is the Answer of a refusal.
func ErrorAnswer(e *api.Error) Answer { return Answer{Err: e} }

// WriteHTTP writes the answer to an HTTP client: what the full node would
// have written had the client asked it directly.
func (a Answer) WriteHTTP(w http.ResponseWriter) {
	status, body := a.JSON()
	if a.Err != nil && a.Err.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(int((a.Err.RetryAfter+time.Second-1)/time.Second), 1)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// errEmptyAnswer is what an answer that holds nothing is written as (a
// full node's bug, never a client's doing).
var errEmptyAnswer = api.Errorf(http.StatusBadGateway, api.CodeInternal, "the full node's answer was empty")

// Tags of an answer on the wire.
const (
	tagErr     byte = 1
	tagVote    byte = 2
	tagSession byte = 3
	tagJoin    byte = 4
)

// Bounds of an answer's fields: what a full node writes fits them all.
const (
	maxAnswerString = 4096   // a message, an id, a token, a challenge
	maxRetryMs      = 3600e3 // an hour
)

// AppendAnswers appends the reply to a relay message (one answer per
// request, in order) to b.
func AppendAnswers(b []byte, as []Answer) []byte {
	b = append(b, answerMagic...)
	b = binary.AppendUvarint(b, uint64(len(as)))
	for _, a := range as {
		b = appendAnswer(b, a)
	}
	return b
}

func appendAnswer(b []byte, a Answer) []byte {
	switch {
	case a.Err != nil:
		b = append(b, tagErr)
		b = binary.AppendUvarint(b, uint64(a.Err.Status))
		b = wire.AppendString(b, a.Err.Code)
		b = wire.AppendString(b, a.Err.Message)
		return binary.AppendUvarint(b, uint64(a.Err.RetryAfter/time.Millisecond))
	case a.Vote != nil:
		b = append(b, tagVote)
		b = binary.AppendVarint(b, a.Vote.ServerTime)
		b = binary.AppendUvarint(b, uint64(len(a.Vote.Results)))
		for _, r := range a.Vote.Results {
			for _, s := range [...]string{r.Idem, r.Status, r.VoteID, r.Error, r.Stamp} {
				b = wire.AppendString(b, s)
			}
			if r.ElapsedMs == nil {
				b = append(b, 0)
				continue
			}
			b = append(b, 1)
			b = binary.AppendVarint(b, *r.ElapsedMs)
		}
		return b
	case a.Session != nil:
		s := a.Session
		b = append(b, tagSession)
		for _, f := range [...]string{s.Status, s.Challenge, s.Token, s.Voter} {
			b = wire.AppendString(b, f)
		}
		b = binary.AppendVarint(b, int64(s.Bits))
		b = binary.AppendVarint(b, s.ExpiresAt)
		return binary.AppendVarint(b, s.ServerTime)
	case a.Join != nil:
		b = append(b, tagJoin)
		b = wire.AppendString(b, a.Join.Voter)
		if a.Join.Counted {
			return append(b, 1)
		}
		return append(b, 0)
	}
	return appendAnswer(b, ErrorAnswer(errEmptyAnswer))
}

// DecodeAnswers reads the reply to a relay message of want requests. It
// refuses, whole, one that is damaged or over the bounds.
func DecodeAnswers(b []byte, want int) ([]Answer, error) {
	if len(b) < len(answerMagic) || string(b[:len(answerMagic)]) != answerMagic {
		return nil, fmt.Errorf("%w: not a relay answer", ErrMalformed)
	}
	r := wire.NewReader(b[len(answerMagic):], ErrMalformed)
	n := r.Count(MaxBatch, "answers")
	if r.Err() == nil && int(n) != want {
		return nil, fmt.Errorf("%w: %d answers to %d requests", ErrMalformed, n, want)
	}
	as := make([]Answer, 0, n)
	for range n {
		a := decodeAnswer(r)
		if r.Err() != nil {
			return nil, r.Err()
		}
		as = append(as, a)
	}
	if r.Err() != nil {
		return nil, r.Err()
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last answer", ErrMalformed, r.Len())
	}
	return as, nil
}

func decodeAnswer(r *wire.Reader) Answer {
	str := func(what string) string { return r.String(maxAnswerString, what) }
	switch tag := r.Byte(); tag {
	case tagErr:
		status, code, msg, retry := r.Uvarint(), str("code"), str("message"), r.Uvarint()
		if r.Err() == nil && (status < 400 || status > 599 || code == "" || retry > maxRetryMs) {
			r.Fail("error %d %q, retry after %d ms", status, code, retry)
		}
		e := api.Errorf(int(status), code, "%s", msg)
		e.RetryAfter = time.Duration(retry) * time.Millisecond
		return Answer{Err: e}
	case tagVote:
		v := &api.VoteResponse{ServerTime: r.Varint()}
		n := r.Count(api.MaxBatch, "results")
		for range n {
			var res api.VoteResult
			res.Idem, res.Status, res.VoteID, res.Error, res.Stamp = str("idem"), str("status"), str("vote id"), str("error"), str("stamp")
			if r.Byte() == 1 {
				ms := r.Varint()
				res.ElapsedMs = &ms
			}
			v.Results = append(v.Results, res)
		}
		return Answer{Vote: v}
	case tagSession:
		s := &api.SessionResponse{Status: str("status"), Challenge: str("challenge"), Token: str("token"), Voter: str("voter")}
		s.Bits, s.ExpiresAt, s.ServerTime = int(r.Varint()), r.Varint(), r.Varint()
		if r.Err() == nil && (s.Bits < 0 || s.Bits > 64) {
			r.Fail("%d puzzle bits", s.Bits)
		}
		return Answer{Session: s}
	case tagJoin:
		j := &JoinAnswer{Voter: str("voter")}
		j.Counted = r.Byte() == 1
		return Answer{Join: j}
	default:
		if r.Err() == nil {
			r.Fail("answer tag %d", tag)
		}
		return Answer{}
	}
}

// JSON is the answer's HTTP status and body, as the full node would
// have written them to its own client.
func (a Answer) JSON() (status int, body []byte) {
	switch {
	case a.Err != nil:
		var e api.ErrorBody
		e.Error.Code, e.Error.Message = a.Err.Code, a.Err.Message
		body, _ = json.Marshal(e) // strings only: it cannot fail
		return a.Err.Status, append(body, '\n')
	case a.Vote != nil:
		return http.StatusOK, a.Vote.AppendJSON(make([]byte, 0, 160)) // a single vote's fits
	case a.Session != nil:
		body, _ = json.Marshal(a.Session)
		return http.StatusOK, append(body, '\n')
	case a.Join != nil:
		body, _ = json.Marshal(a.Join)
		return http.StatusOK, append(body, '\n')
	}
	return ErrorAnswer(errEmptyAnswer).JSON()
}

// appendAnswersV1 appends the reply an edge of the release before reads
// (it sent TRQ1 or TRQ2): each answer's status, Retry-After and JSON body.
func appendAnswersV1(b []byte, as []Answer) []byte {
	b = append(b, answerMagicV1...)
	b = binary.AppendUvarint(b, uint64(len(as)))
	for _, a := range as {
		status, body := a.JSON()
		var retry time.Duration
		if a.Err != nil {
			retry = a.Err.RetryAfter
		}
		b = binary.AppendUvarint(b, uint64(status))
		b = binary.AppendUvarint(b, uint64(retry/time.Millisecond))
		b = wire.AppendBytes(b, body)
	}
	return b
}
