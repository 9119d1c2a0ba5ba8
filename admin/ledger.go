package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"tally/api"
	"tally/hlc"
	"tally/ids"
	"tally/ledger"
	"tally/poll"
)

// HandleLedger serves GET /v1/polls/{poll}/ledger (admin): this node's
// records for the poll as NDJSON, streamed; with format=binary the binary
// record stream, and with after=N too only the tail of this node's own
// chain above seq N. With copy_of=R it serves instead this node's copy of
// replica R's chain (package buddy) up to R's own signed head of it, and
// that head: certification checks it with the key R is known by, and
// compares the copy's length with R's gossiped count.
func (h *Host) HandleLedger(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("poll")
	def, ok := h.cfg.State.Defs.Poll(id)
	if !ok {
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", id))
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err == nil && (len(q["format"]) > 1 || len(q["after"]) > 1 || len(q["fence"]) > 1 || len(q["copy_of"]) > 1) {
		err = errors.New("a parameter given twice")
	}
	if err != nil {
		api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "query: %v", err))
		return
	}
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
	if q.Has("copy_of") {
		h.serveCopy(w, r, def, q.Get("copy_of"), binary, after, q.Has("fence"))
		return
	}
	if q.Has("fence") {
		// Certification reading the last records at close: no record of
		// the poll may land here after the ones it reads.
		if err := h.fence(def, q.Get("fence"), binary); err != nil {
			api.WriteError(w, r, err)
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
	if ledger.WriteClose(w, h.pollClose(def)) != nil {
		return
	}
	h.cfg.Ledger.ExportSigned(w, id, h.cfg.SigningKey)
}

// serveCopy serves this node's copy of replica's chain of the poll.
func (h *Host) serveCopy(w http.ResponseWriter, r *http.Request, def poll.Definition, replica string, binary bool, after uint64, fenced bool) {
	switch {
	case ids.Valid(replica) != nil:
		api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "copy_of %.64q: want a replica id", replica))
		return
	case fenced:
		api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "copy_of with fence: a copy takes no new records to fence"))
		return
	case h.cfg.Copies == nil:
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodeNotFound, "this node keeps no copies of other replicas' chains (an edge, or a single node)"))
		return
	}
	recs, head, err := h.cfg.Copies.Copy(def.ID, replica, after)
	if err != nil {
		api.WriteError(w, r, api.Errorf(http.StatusInternalServerError, api.CodeInternal, "%v", err))
		return
	}
	if binary {
		w.Header().Set("Content-Type", ledger.StreamContentType)
		ledger.WriteStreamHead(w, recs, head)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	if ledger.WriteClose(w, h.pollClose(def)) != nil {
		return
	}
	// The replica's signed head ends its chain, as in its own export: an
	// auditor sees which key vouches for the copy.
	if _, err := ledger.WriteNDJSON(w, recs); err == nil && head != nil {
		ledger.WriteSignedHead(w, head)
	}
}

// maxFenceAhead bounds how far ahead of this node's clock a fence's time
// may be (the hybrid clock's own bound on a remote time): a fence closes
// a poll here at most that much before this node would.
const maxFenceAhead = 5 * time.Second

// fence checks a fence= (the certifier's hybrid-clock time, in
// wall.logical@replica form) against this node's view of the poll and,
// when the poll's grace is over by then, fences it (Config.Fence). A poll
// whose grace ends later here (the close has not reached this node, or
// the fence is early) is 409 poll_not_closed, and nothing changes.
func (h *Host) fence(def poll.Definition, raw string, binary bool) error {
	ts, err := hlc.Parse(raw)
	if err != nil || ts.String() != raw || ids.Valid(ts.Replica) != nil || !binary || h.cfg.Fence == nil {
		return api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest,
			"fence %.64q: want a hybrid-clock time (wall.logical@replica, canonical) with format=binary, at a full node", raw)
	}
	now, err := h.cfg.Clock.Now()
	if err != nil {
		return api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "cannot read the clock: %v", err)
	}
	if ts.Wall > now.Wall+maxFenceAhead.Milliseconds() {
		return api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable,
			"fence at %d is %d ms ahead of this node's clock (at most %d)", ts.Wall, ts.Wall-now.Wall, maxFenceAhead.Milliseconds())
	}
	if end := def.GraceEnd(); end > ts.Wall {
		return api.Errorf(http.StatusConflict, api.CodePollNotClosed,
			"poll %q: this node's grace window ends at %d, after the fence at %d (it has not heard of the close, or the fence is early)", def.ID, end, ts.Wall)
	}
	if err := h.cfg.Fence(def.ID, ts.Wall); err != nil {
		return api.Errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "%v", err)
	}
	return nil
}

// pollClose is an export's close line: how certification applies the
// poll's close. The rule is the poll's certificate's when it has one (a
// result certified before 2026-12 keeps the stamp rule), else the rule
// this node certifies by.
func (h *Host) pollClose(def poll.Definition) ledger.PollClose {
	c := ledger.PollClose{Poll: def.ID, ClosesAt: def.ClosesAt, FirstWins: def.Quiz != nil, CloseRule: ledger.CloseByNode}
	if cert, ok := h.cfg.State.Defs.Certificate(def.ID); ok && cert.Status == ledger.Reconciled {
		var d api.ResultDetail
		if json.Unmarshal(cert.Detail, &d) == nil && d.Result != nil {
			c.CloseRule = d.Result.CloseRule
		}
	}
	return c
}
