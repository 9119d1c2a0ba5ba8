package node

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"tally/api"
	"tally/ingest"
	"tally/relay"
)

// Votes are counted by their answer once, where the answer is decided
// (docs/metrics.md). A full node counts in tally_votes_total every vote
// its pipeline answers — its own clients' over HTTP and the live socket,
// and those the edges relay to it — and those it refuses before the
// pipeline (not ready yet, a relayed body too large for it). An edge
// decides no vote that counts: it counts every answer its clients got,
// the full node's or its own (unavailable, outcome_unknown: no full node
// answered in time; the refusals it makes before relaying, as any full
// node would, which reach no full node), in tally_edge_votes_total with
// the same labels. An operator sums one of the two, never both: a vote
// relayed through an edge is in each.

// edgeVoter is fanout's Voter at an edge: the edge's relay, its answers
// counted.
type edgeVoter struct {
	counts edgeVotes
	e      *relay.Edge
}

// edgeVotes counts an edge's clients' votes by the answer they got
// (tally_edge_votes_total).
type edgeVotes struct{ c *prometheus.CounterVec }

func (v edgeVoter) Vote(poll string, body []byte, s api.Sender) (api.VoteResponse, error) {
	res, err := v.e.Vote(poll, body, s)
	if err != nil {
		v.counts.refusal(ingest.RefusalCode(err), ingest.VotesIn(body))
		return res, err
	}
	v.counts.results(res)
	return res, err
}

// refusal counts a request an edge's client was answered with an
// error: refused, or for outcome_unknown (a full node may have taken it;
// the client retries with the same key) result "unknown".
func (e edgeVotes) refusal(code string, votes int) {
	result := ingest.StatusRejected
	if code == api.CodeOutcomeUnknown {
		result = resultUnknown
	}
	e.c.WithLabelValues(result, code).Add(float64(max(votes, 1)))
}

// resultUnknown is tally_edge_votes_total's result for an answer that
// says nothing of the vote's fate (504 outcome_unknown).
const resultUnknown = "unknown"

// results counts the votes of a success answer by their result, a
// rejected one by its error code.
func (e edgeVotes) results(v api.VoteResponse) {
	if len(v.Results) == 0 {
		e.refusal(api.CodeInternal, 1) // the client got an answer it cannot read either
		return
	}
	for _, r := range v.Results {
		reason := ""
		if r.Status == ingest.StatusRejected {
			reason = r.Error
		}
		e.c.WithLabelValues(r.Status, reason).Inc()
	}
}

// wrap wraps an edge's vote route (POST /v1/polls/{poll}/votes,
// its readiness check included): every answer is counted as the client
// got it.
func (e edgeVotes) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := &headReader{ReadCloser: r.Body}
		r.Body = in
		out := &answerRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(out, r)
		if out.status == http.StatusOK {
			var v api.VoteResponse
			if json.Unmarshal(out.body.Bytes(), &v) != nil {
				v.Results = nil // counted as internal: the client cannot read it either
			}
			e.results(v)
			return
		}
		var body api.ErrorBody
		code := api.CodeInternal
		if json.Unmarshal(out.body.Bytes(), &body) == nil && body.Error.Code != "" {
			code = body.Error.Code
		}
		e.refusal(code, ingest.VotesIn(in.head.Bytes()))
	})
}

// capturedMax bounds what wrap keeps of a request body and of
// its answer: a vote request is at most relay.MaxBody, its answer a few
// hundred bytes a vote.
const capturedMax = relay.MaxBody

// headReader keeps the first capturedMax bytes read from a body.
type headReader struct {
	io.ReadCloser
	head bytes.Buffer
}

func (h *headReader) Read(p []byte) (int, error) {
	k, err := h.ReadCloser.Read(p)
	if room := capturedMax - h.head.Len(); room > 0 {
		h.head.Write(p[:min(k, room)])
	}
	return k, err
}

// answerRecorder passes an answer on, keeping its status and the first
// capturedMax bytes of its body.
type answerRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
	body   bytes.Buffer
}

func (a *answerRecorder) WriteHeader(status int) {
	if !a.wrote {
		a.status, a.wrote = status, true
	}
	a.ResponseWriter.WriteHeader(status)
}

func (a *answerRecorder) Write(p []byte) (int, error) {
	a.wrote = true
	if room := capturedMax - a.body.Len(); room > 0 {
		a.body.Write(p[:min(len(p), room)])
	}
	return a.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (a *answerRecorder) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// votesRoute is POST /v1/polls/{poll}/votes once the node is ready, every
// answer counted once: at an edge by edgeVotes.wrap; at a full node by
// its pipeline, and here the refusal while it is not ready.
func (n *Node) votesRoute(votes http.HandlerFunc, ready func(http.Handler) http.Handler) http.Handler {
	if n.edge != nil {
		return edgeVotes{n.m.edgeVotes}.wrap(ready(votes))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := n.readyErr(); err != nil {
			n.ingest.CountRefused(err, 1)
			api.WriteError(w, r, err)
			return
		}
		votes(w, r)
	})
}
