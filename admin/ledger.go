package admin

import (
	"net/http"
	"time"

	"tally/api"
	"tally/ledger"
)

// HandleLedger serves GET /v1/polls/{poll}/ledger (admin): this node's
// records for the poll as NDJSON, streamed.
func (h *Host) HandleLedger(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("poll")
	def, ok := h.cfg.State.Poll(id)
	if !ok {
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", id))
		return
	}
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Now().Add(10 * time.Minute))
	// Headers are gone by the time an error could happen; a truncated
	// stream fails verification.
	if r.URL.Query().Get("format") == "binary" { // node to node, for certification
		w.Header().Set("Content-Type", ledger.StreamContentType)
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
