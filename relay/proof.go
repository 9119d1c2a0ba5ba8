package relay

import (
	"net/http"
	"time"

	"tally/api"
	"tally/ids"
)

// proofRetry is the Retry-After of a proof refused because a full node
// does not serve proofs through the relay yet: a rolling upgrade takes
// minutes, not seconds.
const proofRetry = 30 * time.Second

// HandleProof serves GET /v1/polls/{poll}/proofs/{leaf} at an edge: a
// voter's proof, from any ready full node (its own region's first), whose
// status and JSON body the client gets as they are. A leaf that is not
// 64 lowercase hex digits is refused 400 and a poll id that cannot be
// 404, here, as a full node refuses them. While a full node of the
// release before is in the cluster (Receipts is false), which relays no
// proofs, it is 503 with Retry-After.
func (e *Edge) HandleProof(w http.ResponseWriter, r *http.Request) {
	poll, leaf := r.PathValue("poll"), r.PathValue("leaf")
	switch {
	case !validLeaf(leaf):
		api.WriteError(w, r, errLeaf())
		return
	case ids.Valid(poll) != nil:
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", poll))
		return
	case !e.cfg.Receipts():
		api.WriteError(w, r, errNoProofs())
		return
	}
	e.Relay(r.Context(), Request{Kind: KindProof, Poll: poll, Body: []byte(leaf)}).WriteHTTP(w)
}

// errLeaf is the refusal of a proof request whose leaf cannot be one.
func errLeaf() *api.Error {
	return api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, `a leaf is 64 lowercase hex digits: the receipt's "leaf"`) // as a full node says
}

// errNoProofs is the refusal of a proof request while a full node of the
// release before is in the cluster.
func errNoProofs() *api.Error {
	e := api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable,
		"proofs are not served through this edge until every full node of the cluster runs this release (an upgrade is under way): try again later")
	e.RetryAfter = proofRetry
	return e
}

// proofsRefused answers the proof requests of batch 503 (errNoProofs) —
// it goes as TRQ4, which holds none — and returns the others.
func proofsRefused(batch []*pending) []*pending {
	var out []*pending // nil while batch holds no proof request
	for i, p := range batch {
		switch {
		case p.req.Kind == KindProof && out == nil:
			out = append(make([]*pending, 0, len(batch)), batch[:i]...)
			fallthrough
		case p.req.Kind == KindProof:
			p.done <- ErrorAnswer(errNoProofs())
		case out != nil:
			out = append(out, p)
		}
	}
	if out == nil {
		return batch
	}
	return out
}
