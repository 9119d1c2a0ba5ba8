package admin

import (
	"net/http"
	"time"

	"tally/api"
	"tally/poll"
)

// A host's changes to a running poll are newer writes of its definition,
// replicated like any other (the close, in handlers.go, too).

// HandleReveal serves POST /v1/polls/{poll}/reveal (admin): a hidden
// poll's counts become visible to everyone, on every endpoint and stream.
// Revealing a poll that is not hidden changes nothing.
func (h *Host) HandleReveal(w http.ResponseWriter, r *http.Request) {
	h.amend(w, r, func(def *poll.Definition, nowMs int64) (bool, error) {
		if !def.Hidden {
			return false, nil
		}
		def.Hidden = false
		return true, nil
	})
}

// HandleExtend serves POST /v1/polls/{poll}/extend (admin): an open poll
// closes later. A poll already closed cannot be reopened (its grace votes
// were ledgered as late), and a close earlier than the current one is
// what /close is for.
func (h *Host) HandleExtend(w http.ResponseWriter, r *http.Request) {
	var req api.ExtendRequest
	if err := api.DecodeJSON(w, r, 1<<10, &req); err != nil {
		api.WriteError(w, r, err)
		return
	}
	h.amend(w, r, func(def *poll.Definition, nowMs int64) (bool, error) {
		if nowMs >= def.ClosesAt {
			return false, api.Errorf(http.StatusConflict, api.CodePollClosed, "poll %q closed at %s: a closed poll cannot be extended",
				def.ID, time.UnixMilli(def.ClosesAt).UTC().Format(time.RFC3339))
		}
		var to int64
		switch {
		case (req.ClosesAt == nil) == (req.ByS == nil):
			return false, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "give closes_at (Unix ms) or by_s (seconds), one of them")
		case req.ClosesAt != nil:
			to = *req.ClosesAt
		default:
			if !(*req.ByS >= 1 && *req.ByS <= poll.MaxDuration.Seconds()) { // NaN fails too
				return false, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "by_s must be 1-%v", poll.MaxDuration.Seconds())
			}
			to = poll.AddMs(def.ClosesAt, int64(*req.ByS*1000))
		}
		if to <= def.ClosesAt {
			return false, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "closes_at must be later than the current close (%d); use /close to close earlier", def.ClosesAt)
		}
		def.ClosesAt = to
		if err := def.Validate(); err != nil {
			return false, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "%v", err)
		}
		return true, nil
	})
}

// amend applies change to a poll's definition and, when it changed
// anything, writes the new definition at a fresh stamp; it answers with
// the poll's view.
func (h *Host) amend(w http.ResponseWriter, r *http.Request, change func(def *poll.Definition, nowMs int64) (bool, error)) {
	id := r.PathValue("poll")
	if _, err := h.amendPoll(id, notParked(change)); err != nil {
		api.WriteError(w, r, err)
		return
	}
	h.writeView(w, r, http.StatusOK, id)
}

// notParked refuses to change a quiz question that has not started: the
// quiz's host endpoints run its questions.
func notParked(change func(def *poll.Definition, nowMs int64) (bool, error)) func(def *poll.Definition, nowMs int64) (bool, error) {
	return func(def *poll.Definition, nowMs int64) (bool, error) {
		if def.Parked() {
			return false, api.Errorf(http.StatusConflict, api.CodePollNotOpen,
				"question %d of quiz %q has not started: start it with POST /v1/quizzes/%s/start", def.Quiz.Index+1, def.Quiz.Quiz, def.Quiz.Quiz)
		}
		return change(def, nowMs)
	}
}

// amendPoll is amend without the HTTP: it reports whether the definition
// changed.
func (h *Host) amendPoll(id string, change func(def *poll.Definition, nowMs int64) (bool, error)) (bool, error) {
	reg, ok := h.cfg.State.Defs.PollRegister(id)
	if !ok {
		return false, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", id)
	}
	def := reg.Value
	if def.Quiz != nil {
		q := *def.Quiz // change may set Started: not on the stored copy
		def.Quiz = &q
	}
	if def.CloseStamp == nil { // the schedule as created: stamped with the creation
		created := reg.TS
		def.CloseStamp = &created
	}
	ts, err := h.cfg.Clock.Now()
	if err != nil {
		return false, err
	}
	opensAt, closesAt, parked := def.OpensAt, def.ClosesAt, def.Parked()
	// "Now" is after everything this node stamped and every vote of the
	// poll it has heard of from the other regions: a vote stamped after a
	// voter's earlier one from a region whose clock runs ahead may be a
	// little ahead of the clocks (1 s at most, ingest.MaxStampAhead), and
	// a close "now" must come after it.
	nowMs := max(ts.Wall, h.cfg.Clock.Issued(), h.cfg.State.LatestWall(id))
	changed, err := change(&def, nowMs)
	if err != nil || !changed {
		return false, err
	}
	if def.OpensAt != opensAt || def.ClosesAt != closesAt || def.Parked() != parked {
		def.CloseStamp = &ts // this write sets the schedule
	}
	if _, err := h.cfg.State.Defs.PutPoll(def, ts); err != nil {
		return false, err
	}
	if def.ClosesAt == nowMs+1 {
		h.closeSettles(def.ClosesAt)
	}
	return true, nil
}

// closeSettles waits, a few milliseconds at most, until the node's clock
// reaches a close that takes effect in the next millisecond (a close
// "now" is set just after the votes stamped in its own millisecond), so
// that the answer to the close shows the poll closed.
func (h *Host) closeSettles(closesAt int64) {
	deadline := time.Now().Add(5 * time.Millisecond)
	for h.cfg.Now().UnixMilli() < closesAt && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
}
