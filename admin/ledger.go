package admin

import (
	"net/http"
	"strconv"
	"time"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
)

// HandleLedger serves GET /v1/polls/{poll}/ledger (admin): this node's
// records for the poll as NDJSON, streamed; with format=binary the binary
// record stream, and with after=N too only the tail of this node's own
// chain above seq N.
func (h *Host) HandleLedger(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("poll")
	def, ok := h.cfg.State.Poll(id)
	if !ok {
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", id))
		return
	}
	q := r.URL.Query()
	binary := q.Get("format") == "binary" // node to node, for certification
	var after uint64
	if q.Has("after") {
		n, err := strconv.ParseUint(q.Get("after"), 10, 64)
		if err != nil || !binary {
			api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest,
				"after %q: want a record seq (a decimal count, 0 or more) with format=binary", q.Get("after")))
			return
		}
		after = n
	}
	if q.Has("fence") {
		// Certification reading the last records at close: no record of
		// the poll may land here after the ones it reads.
		ts, err := hlc.Parse(q.Get("fence"))
		if err != nil || !binary || h.cfg.Fence == nil {
			api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest,
				"fence %.64q: want a hybrid-clock time (wall.logical@replica) with format=binary, at a full node", q.Get("fence")))
			return
		}
		// The fence closes the poll here only if this node's definition
		// ends its grace by then (it may not have heard of the close yet);
		// otherwise the clock is left alone: a fence never moves a node's
		// time into a poll that is still open for it.
		if def.GraceEnd() > ts.Wall {
			api.WriteError(w, r, api.Errorf(http.StatusConflict, api.CodePollNotClosed,
				"poll %q: this node's grace window ends at %d, after the fence at %d (the close has not reached it yet)", id, def.GraceEnd(), ts.Wall))
			return
		}
		if err := h.cfg.Fence(ts); err != nil {
			api.WriteError(w, r, api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "%v", err))
			return
		}
	}
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Now().Add(10 * time.Minute))
	// Headers are gone by the time an error could happen; a truncated
	// stream fails verification.
	if binary {
		w.Header().Set("Content-Type", ledger.StreamContentType)
		if q.Has("after") { // the tail of this node's own chain (certification's prefetch)
			h.cfg.Ledger.ExportStreamAfter(w, id, h.cfg.Ledger.Replica(), after)
			return
		}
		h.cfg.Ledger.ExportStream(w, id)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	// The close line first: an auditor's merge applies the poll's close
	// as its certification does (docs/certification.md).
	if ledger.WriteClose(w, ledger.PollClose{Poll: id, ClosesAt: def.ClosesAt, FirstWins: def.Quiz != nil}) != nil {
		return
	}
	h.cfg.Ledger.ExportSigned(w, id, h.cfg.SigningKey)
}
