package relay

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"tally/api"
	"tally/ids"
	"tally/internal/wire"
	"tally/receipt"
)

// ErrMalformed is what a relay message that cannot be decoded is refused
// with (wrapped with the reason).
var ErrMalformed = errors.New("relay: malformed message")

// Bounds of a relay message. A batch is cut by count and by bytes at the
// edge; the full node refuses anything beyond them whole.
const (
	MaxBatch      = 512       // requests in one relay message
	MaxBatchBytes = 768 << 10 // under NATS's default 1 MiB payload
	MaxBody       = 64 << 10  // one request's body
	maxIP         = 64        // an IPv6 address with a zone fits
	MaxUserAgent  = 1024      // bytes of a User-Agent relayed: what binds a token (session.BoundUserAgent)
	maxToken      = 2048
)

// Kinds of request an edge relays.
const (
	KindVote    byte = 1 // POST /v1/polls/{poll}/votes, or a vote on a live socket
	KindSession byte = 2 // POST /v1/session
	// KindJoin is a quiz participant's join on a live socket: the full
	// node checks its voter token (Sender.Token, bound to Sender.IP and
	// UserAgent) and answers the voter it names and whether it counts
	// among the joined (JoinAnswer). No body.
	KindJoin byte = 3
	// KindProof is GET /v1/polls/{poll}/proofs/{leaf} (TRQ5 only): Poll
	// is the poll, Body the receipt's leaf (64 lowercase hex digits); the
	// full node answers its status and JSON body (ProofAnswer).
	KindProof byte = 4
)

// Request is one client's request as the edge took it: what it sent and
// everything the full node decides from (api.Sender, after the edge
// applied --trusted-proxies and timed a quiz answer on its own clock).
type Request struct {
	Kind byte
	Poll string // KindVote: the poll (or quiz question) voted in
	// Votes are a vote request's votes, decoded and checked by the edge
	// (api.DecodeVotes): relayed in binary, so the full node does no
	// JSON. Nil from an edge of a release before (TRQ3), which relays
	// the Body.
	Votes []api.Vote
	// Body is a session request's body as the client sent it (and a vote
	// request's, from an edge of a release before).
	Body   []byte
	Sender api.Sender
}

// The versions of the relay messages. An edge that sends TRQ5 may relay
// proof requests (KindProof) and reads answers with receipts and proofs
// (TRA3); one that sends TRQ4 relays votes decoded (Request.Votes) and
// reads typed binary answers without them (TRA2); one that sends TRQ3
// relays their JSON bodies and reads TRA2; one of the releases before
// sent TRQ2 (or TRQ1, without a start-by) and reads each answer's JSON
// (TRA1), which a full node still writes it. Upgrade the full nodes
// before the edges. A full node of v0.5.0 reads TRQ4 at most: an edge
// sends TRQ5 only once every full node speaks cluster protocol 3 or
// later (EdgeConfig.Receipts), else TRQ4.
const (
	batchMagic    = "TRQ5" // TRQ4 that may hold proof requests, answered TRA3
	batchMagicV4  = "TRQ4" // TRQ3 with votes in binary
	batchMagicV3  = "TRQ3" // TRQ2 with typed answers
	batchMagicV2  = "TRQ2" // TRQ1 and the time a full node may start it by (unix ms; 0: any time)
	batchMagicV1  = "TRQ1"
	answerMagic   = "TRA3" // TRA2 with receipts and proofs
	answerMagicV2 = "TRA2"
	answerMagicV1 = "TRA1"
)

// AppendBatch appends the relay message of reqs to b, with no bound on
// when it may be answered (tests, bench/relayload).
func AppendBatch(b []byte, reqs []Request) []byte { return AppendBatchBy(b, 0, reqs) }

// AppendBatchBy appends the relay message of reqs to b (TRQ5): a full
// node may start answering it until startBy (unix ms; 0: any time), and
// drops it unanswered after — by then its edge has answered its clients
// 503, and a vote ledgered later would count though its voter was told
// it failed.
func AppendBatchBy(b []byte, startBy int64, reqs []Request) []byte {
	return appendBatch(b, batchMagic, startBy, reqs)
}

// appendBatch appends the relay message of reqs in version magic (TRQ5,
// or TRQ4, which holds no proof requests and gets no receipts back).
func appendBatch(b []byte, magic string, startBy int64, reqs []Request) []byte {
	b = append(b, magic...)
	b = binary.AppendVarint(b, startBy)
	b = binary.AppendUvarint(b, uint64(len(reqs)))
	for _, r := range reqs {
		b = append(b, r.Kind)
		b = wire.AppendString(b, r.Poll)
		if r.Kind == KindVote {
			b = appendVotes(b, r.Votes)
		} else {
			b = wire.AppendBytes(b, r.Body)
		}
		s := r.Sender
		b = wire.AppendString(b, s.IP)
		b = wire.AppendString(b, s.UserAgent)
		b = wire.AppendString(b, s.Token)
		b = binary.AppendVarint(b, int64(s.SocketAge))
		b = binary.AppendVarint(b, s.ShownMs)
		b = binary.AppendVarint(b, s.RTTMs)
		b = binary.AppendVarint(b, s.ReceivedMs)
	}
	return b
}

// appendVotes appends a vote request's votes: their count, then each
// vote's five fields.
func appendVotes(b []byte, votes []api.Vote) []byte {
	b = binary.AppendUvarint(b, uint64(len(votes)))
	for _, v := range votes {
		b = wire.AppendString(b, v.Option)
		b = wire.AppendString(b, v.Voter)
		b = wire.AppendString(b, v.Idem)
		b = wire.AppendString(b, v.Name)
		b = wire.AppendString(b, v.After)
	}
	return b
}

// RequestSize is about how many bytes r adds to a relay message, or to
// its answer where that is larger: what the edge cuts its batches by, so
// that the answer to a batch fits a NATS payload too. A vote's answer may
// carry its receipt (receiptWire bytes); a proof's, up to
// receipt.MaxProofJSON.
func RequestSize(r Request) int {
	n := 1 + len(r.Poll) + len(r.Body) + len(r.Sender.IP) + len(r.Sender.UserAgent) + len(r.Sender.Token) + 7*binary.MaxVarintLen64
	for _, v := range r.Votes {
		n += len(v.Option) + len(v.Voter) + len(v.Idem) + len(v.Name) + len(v.After) + 5*binary.MaxVarintLen64 + receiptWire
	}
	if r.Kind == KindProof {
		n += receipt.MaxProofJSON
	}
	return n
}

// DecodeBatch reads a relay message's requests (DecodeBatchBy).
func DecodeBatch(b []byte) ([]Request, error) {
	_, reqs, err := DecodeBatchBy(b)
	return reqs, err
}

// DecodeBatchBy reads a relay message: when a full node may start it by
// (unix ms; 0: any time) and its requests. It refuses, whole, one that is
// damaged, over the bounds, or names a kind or poll id that cannot be.
// The bodies alias one copy of b, made here: nothing returned aliases b.
func DecodeBatchBy(b []byte) (startBy int64, reqs []Request, err error) {
	_, startBy, reqs, err = decodeBatch(b)
	return startBy, reqs, err
}

// decodeBatch is DecodeBatchBy that also says which version of answer
// the edge reads (reply: answerMagic, answerMagicV2 or answerMagicV1).
func decodeBatch(b []byte) (reply string, startBy int64, reqs []Request, err error) {
	if len(b) > MaxBatchBytes+len(batchMagic)+binary.MaxVarintLen64 {
		return "", 0, nil, fmt.Errorf("%w: %d bytes, at most %d", ErrMalformed, len(b), MaxBatchBytes)
	}
	if len(b) < len(batchMagic) {
		return "", 0, nil, fmt.Errorf("%w: not a relay batch", ErrMalformed)
	}
	magic := string(b[:len(batchMagic)])
	switch magic {
	case batchMagic:
		reply = answerMagic
	case batchMagicV4, batchMagicV3:
		reply = answerMagicV2
	case batchMagicV2, batchMagicV1:
		reply = answerMagicV1
	default:
		return "", 0, nil, fmt.Errorf("%w: not a relay batch", ErrMalformed)
	}
	decoded := magic == batchMagic || magic == batchMagicV4 // votes in binary
	r := wire.NewReader(bytes.Clone(b[len(batchMagic):]), ErrMalformed)
	if magic != batchMagicV1 {
		if startBy = r.Varint(); startBy < 0 {
			return "", 0, nil, fmt.Errorf("%w: start-by %d", ErrMalformed, startBy)
		}
	}
	n := r.Count(MaxBatch, "requests")
	if r.Err() != nil {
		return "", 0, nil, r.Err()
	}
	reqs = make([]Request, 0, n)
	var poll, ua string // most requests share the previous one's: one string, not one each
	for range n {
		var q Request
		q.Kind = r.Byte()
		q.Poll = same(&poll, r.LenBytes(ids.MaxLen, "poll id"))
		if decoded && q.Kind == KindVote {
			q.Votes = readVotes(r)
		} else if q.Body = r.LenBytes(MaxBody, "body"); len(q.Body) == 0 {
			q.Body = nil
		}
		q.Sender.IP = r.String(maxIP, "address")
		q.Sender.UserAgent = same(&ua, r.LenBytes(MaxUserAgent, "user agent"))
		q.Sender.Token = r.String(maxToken, "token")
		q.Sender.SocketAge = time.Duration(r.Varint())
		q.Sender.ShownMs = r.Varint()
		q.Sender.RTTMs = r.Varint()
		q.Sender.ReceivedMs = r.Varint()
		if r.Err() != nil {
			return "", 0, nil, r.Err()
		}
		if err := checkRequest(q, decoded, magic == batchMagic); err != nil {
			return "", 0, nil, err
		}
		reqs = append(reqs, q)
	}
	if r.Len() != 0 {
		return "", 0, nil, fmt.Errorf("%w: %d bytes after the last request", ErrMalformed, r.Len())
	}
	return reply, startBy, reqs, nil
}

// checkRequest refuses a request that cannot be: a kind its version does
// not hold (proofs only in TRQ5), or fields its kind does not take.
func checkRequest(q Request, decoded, proofs bool) error {
	switch {
	case q.Kind != KindVote && q.Kind != KindSession && q.Kind != KindJoin && (q.Kind != KindProof || !proofs):
		return fmt.Errorf("%w: request kind %d", ErrMalformed, q.Kind)
	case q.Kind == KindJoin && (q.Poll != "" || len(q.Body) > 0):
		return fmt.Errorf("%w: a join carries no poll or body", ErrMalformed)
	case q.Kind == KindVote && decoded && len(q.Votes) == 0:
		return fmt.Errorf("%w: a vote request without votes", ErrMalformed)
	case (q.Kind == KindVote || q.Kind == KindProof) && ids.Valid(q.Poll) != nil:
		return fmt.Errorf("%w: poll id %q", ErrMalformed, q.Poll)
	case q.Kind == KindProof && !validLeaf(string(q.Body)):
		return fmt.Errorf("%w: a proof request's leaf is not 64 lowercase hex digits", ErrMalformed)
	case q.Kind == KindSession && q.Poll != "":
		return fmt.Errorf("%w: a session request names a poll", ErrMalformed)
	}
	return nil
}

// readVotes reads a vote request's votes (appendVotes), each field held
// to the API's bounds; a full node checks them again (api.CheckVotes).
// Options repeat across a batch: one string each, not one a vote.
func readVotes(r *wire.Reader) []api.Vote {
	n := r.Count(api.MaxBatch, "votes")
	if r.Err() != nil {
		return nil
	}
	votes := make([]api.Vote, n)
	for i := range votes {
		v := &votes[i]
		v.Option = r.String(api.MaxOptionLen, "option")
		v.Voter = r.String(api.MaxVoterLen, "voter")
		v.Idem = r.String(api.MaxIdemLen, "idem")
		v.Name = r.String(api.MaxNameLen, "name")
		v.After = r.String(api.MaxStampLen, "after")
	}
	return votes
}

// same returns *prev if it spells b, else b as a new string, kept in prev.
func same(prev *string, b []byte) string {
	if string(b) != *prev {
		*prev = string(b)
	}
	return *prev
}

// defaults fills what both sides may leave unset: without Seal and Open
// messages pass as they are (tests), without a logger slog's default.
func defaults(seal func([]byte) []byte, open func([]byte) ([]byte, error), log *slog.Logger) (func([]byte) []byte, func([]byte) ([]byte, error), *slog.Logger) {
	if seal == nil {
		seal = func(b []byte) []byte { return b }
	}
	if open == nil {
		open = func(b []byte) ([]byte, error) { return b, nil }
	}
	return seal, open, cmp.Or(log, slog.Default())
}
