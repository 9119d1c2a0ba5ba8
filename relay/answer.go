package relay

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"tally/api"
	"tally/internal/wire"
	"tally/receipt"
)

// Answer is a full node's answer to one Request, one typed value from the
// full node's pipeline to the edge's client: exactly one of Err, Vote,
// Session, Join and Proof is set. It crosses the relay in binary (AppendAnswers);
// only the edge writes it as JSON (WriteHTTP), as the full node would have.
type Answer struct {
	Err     *api.Error // a refusal, with its status, code and Retry-After
	Vote    *api.VoteResponse
	Session *api.SessionResponse
	Join    *JoinAnswer
	Proof   *ProofAnswer
}

// ProofAnswer is a full node's answer to a KindProof request: GET
// /v1/polls/{poll}/proofs/{leaf} as the full node answers it, its status
// and JSON body (an error's too), at most receipt.MaxProofJSON bytes.
type ProofAnswer struct {
	Status int
	Body   []byte
}

// fits reports whether p crosses the relay: a status from 200 to 599
// and a JSON body within receipt.MaxProofJSON (what DecodeAnswers reads).
func (p *ProofAnswer) fits() bool {
	return p.Status >= 200 && p.Status <= 599 && len(p.Body) <= receipt.MaxProofJSON && json.Valid(p.Body)
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
	if a.Proof != nil { // the headers the full node's handler writes with a proof (certify)
		switch status {
		case http.StatusOK:
			w.Header().Set("Cache-Control", "public, max-age=60") // a certified poll's proof does not change
		case http.StatusServiceUnavailable:
			w.Header().Set("Retry-After", "1")
		}
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
	tagProof   byte = 5 // TRA3 only
)

// Bounds of an answer's fields: what a full node writes fits them all.
const (
	maxAnswerString = 4096   // a message, an id, a token, a challenge
	maxRetryMs      = 3600e3 // an hour
)

// receiptWire is a receipt's bytes in a vote result (TRA3): its presence,
// the leaf and the signature. Its poll, vote id and stamp are the
// request's and the result's own.
const receiptWire = 1 + 32 + ed25519.SignatureSize

// errBadProof is what a proof answer that cannot cross the relay is
// written as (a full node's bug, never a client's doing).
var errBadProof = api.Errorf(http.StatusBadGateway, api.CodeInternal, "the full node's proof answer cannot be relayed")

// AppendAnswers appends the reply to a relay message (one answer per
// request, in order) to b: TRA3, with receipts and proofs.
func AppendAnswers(b []byte, as []Answer) []byte {
	return appendAnswers(b, answerMagic, as)
}

// appendAnswers appends the reply in version magic: TRA3, or TRA2 (to an
// edge that sent TRQ4 or TRQ3), which leaves out the receipts and holds
// no proofs.
func appendAnswers(b []byte, magic string, as []Answer) []byte {
	b = append(b, magic...)
	b = binary.AppendUvarint(b, uint64(len(as)))
	v3 := magic == answerMagic
	for _, a := range as {
		b = appendAnswer(b, a, v3)
	}
	return b
}

// appendReply is the reply to a batch in the version its edge reads.
func appendReply(b []byte, reply string, as []Answer) []byte {
	if reply == answerMagicV1 {
		return appendAnswersV1(b, as)
	}
	return appendAnswers(b, reply, as)
}

// appendAnswer appends one answer; v3 (TRA3) with the vote results'
// receipts and a proof answer, which TRA2 cannot carry.
func appendAnswer(b []byte, a Answer, v3 bool) []byte {
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
			} else {
				b = append(b, 1)
				b = binary.AppendVarint(b, *r.ElapsedMs)
			}
			if v3 {
				b = appendReceipt(b, r)
			}
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
	case a.Proof != nil && (!v3 || !a.Proof.fits()):
		return appendAnswer(b, ErrorAnswer(errBadProof), v3)
	case a.Proof != nil:
		b = append(b, tagProof)
		b = binary.AppendUvarint(b, uint64(a.Proof.Status))
		return wire.AppendBytes(b, a.Proof.Body)
	}
	return appendAnswer(b, ErrorAnswer(errEmptyAnswer), v3)
}

// appendReceipt appends a vote result's receipt (TRA3): 0 without one,
// else 1, the leaf's 32 bytes and the signature's 64. The edge rebuilds
// the rest from the request's poll and the result's vote id and stamp, so
// a receipt that names others, or whose leaf or signature is not of
// their form, is left out (it would not verify as rebuilt).
func appendReceipt(b []byte, r api.VoteResult) []byte {
	rc := r.Receipt
	if rc == nil || rc.VoteID == "" || rc.Stamp == "" || rc.VoteID != r.VoteID || rc.Stamp != r.Stamp ||
		!validLeaf(rc.Leaf) || len(rc.Sig) != ed25519.SignatureSize {
		return append(b, 0)
	}
	b = append(b, 1)
	for i := 0; i < len(rc.Leaf); i += 2 { // validLeaf: lowercase hex (decoded here, not allocated: once a vote)
		b = append(b, unhex(rc.Leaf[i])<<4|unhex(rc.Leaf[i+1]))
	}
	return append(b, rc.Sig...)
}

// unhex is the value of a lowercase hex digit.
func unhex(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

// validLeaf reports whether s is a receipt's leaf: 64 lowercase hex
// digits (a SHA-256).
func validLeaf(s string) bool {
	if len(s) != 2*32 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// DecodeAnswers reads the reply to a relay message of reqs (TRA3, or
// TRA2 to one sent as TRQ4): an answer per request, a vote's receipts
// rebuilt with its request's poll. It refuses, whole, one that is
// damaged or over the bounds, or holds a receipt for a request that is
// not a vote.
func DecodeAnswers(b []byte, reqs []Request) ([]Answer, error) {
	if len(b) < len(answerMagic) {
		return nil, fmt.Errorf("%w: not a relay answer", ErrMalformed)
	}
	magic := string(b[:len(answerMagic)])
	if magic != answerMagic && magic != answerMagicV2 {
		return nil, fmt.Errorf("%w: not a relay answer", ErrMalformed)
	}
	r := wire.NewReader(b[len(answerMagic):], ErrMalformed)
	n := r.Count(MaxBatch, "answers")
	if r.Err() == nil && int(n) != len(reqs) {
		return nil, fmt.Errorf("%w: %d answers to %d requests", ErrMalformed, n, len(reqs))
	}
	as := make([]Answer, 0, n)
	for i := range n {
		a := decodeAnswer(r, magic == answerMagic, reqs[i])
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

// decodeAnswer reads the answer to q; v3 (TRA3) with receipts and
// proofs.
func decodeAnswer(r *wire.Reader, v3 bool, q Request) Answer {
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
			if v3 {
				res.Receipt = readReceipt(r, q, res)
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
	case tagProof:
		if !v3 {
			r.Fail("answer tag %d", tag)
			return Answer{}
		}
		p := &ProofAnswer{Status: int(min(r.Uvarint(), 1000))}
		p.Body = bytes.Clone(r.LenBytes(receipt.MaxProofJSON, "proof"))
		if r.Err() == nil && !p.fits() {
			r.Fail("proof answer %d of %d bytes", p.Status, len(p.Body))
		}
		return Answer{Proof: p}
	default:
		if r.Err() == nil {
			r.Fail("answer tag %d", tag)
		}
		return Answer{}
	}
}

// readReceipt reads a vote result's receipt (appendReceipt) and rebuilds
// it: its poll is q's, its vote id and stamp are res's.
func readReceipt(r *wire.Reader, q Request, res api.VoteResult) *receipt.Receipt {
	switch present := r.Byte(); {
	case r.Err() != nil || present == 0:
		return nil
	case present != 1:
		r.Fail("receipt presence %d", present)
		return nil
	}
	leaf, sig := r.Bytes(32), r.Bytes(ed25519.SignatureSize)
	if r.Err() == nil && (q.Kind != KindVote || res.VoteID == "" || res.Stamp == "") {
		r.Fail("a receipt for a request of kind %d, vote id %q, stamp %q", q.Kind, res.VoteID, res.Stamp)
	}
	if r.Err() != nil {
		return nil
	}
	return &receipt.Receipt{Poll: q.Poll, VoteID: res.VoteID, Stamp: res.Stamp, Leaf: hex.EncodeToString(leaf), Sig: bytes.Clone(sig)}
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
	case a.Proof != nil:
		return a.Proof.Status, a.Proof.Body
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
