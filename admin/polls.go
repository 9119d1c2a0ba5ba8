package admin

import (
	"cmp"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"tally/api"
	"tally/ids"
	"tally/poll"
	"tally/state"
)

// View returns the API view of a poll at the current time; admin says
// whether the host asks (and sees the counts of a hidden poll).
func (h *Host) View(id string, admin bool) (api.PollView, error) {
	def, ok := h.cfg.State.Defs.Poll(id)
	now := h.cfg.Now().UnixMilli()
	if !ok || def.Withheld(now) && !admin { // a quiz question is the host's until started
		return api.PollView{}, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll %q", id)
	}
	cert, ok := h.cfg.State.Defs.Certificate(id)
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
	totals, total, err := h.cfg.State.Totals(id)
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
func (h *Host) HandleCreatePoll(w http.ResponseWriter, r *http.Request) {
	var spec poll.Spec
	if err := api.DecodeJSON(w, r, h.cfg.MaxBody, &spec); err != nil {
		api.WriteError(w, r, err)
		return
	}
	ts, err := h.cfg.Clock.Now()
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	def, err := spec.Definition(ts.Wall)
	if err != nil {
		api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "%v", err))
		return
	}
	if _, exists := h.cfg.State.Defs.Poll(def.ID); exists {
		api.WriteError(w, r, api.Errorf(http.StatusConflict, api.CodeInvalidRequest, "poll %q exists", def.ID))
		return
	}
	if _, err := h.cfg.State.Defs.PutPoll(def, ts); err != nil {
		if errors.Is(err, state.ErrTooManyPolls) {
			err = api.Errorf(http.StatusConflict, api.CodeTooManyPolls, "this node holds as many polls as it may (--max-polls); closed polls leave after their certification and retention")
		}
		api.WriteError(w, r, err)
		return
	}
	h.writeView(w, r, http.StatusCreated, def.ID)
}

// HandleListPolls serves GET /v1/polls: newest first (by opens_at, then
// id, both descending), at most ?limit= polls (default 50, at most 200), continuing after
// ?cursor= (the next_cursor of the previous page). next_cursor is absent on
// the last page.
func (h *Host) HandleListPolls(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "malformed query: %v", err))
		return
	}
	limit := api.DefaultPageSize
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > api.MaxPageSize {
			api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "limit must be 1-%d", api.MaxPageSize))
			return
		}
		limit = n
	}
	polls := h.cfg.State.Defs.Polls()
	if ev := q.Get("event"); ev != "" {
		polls = slices.DeleteFunc(polls, func(d poll.Definition) bool { return d.Event != ev })
	}
	if !api.IsAdmin(r) { // quiz questions not started are the host's
		now := h.cfg.Now().UnixMilli()
		polls = slices.DeleteFunc(polls, func(d poll.Definition) bool { return d.Withheld(now) })
	}
	slices.Reverse(polls) // newest first
	if c := q.Get("cursor"); c != "" {
		after, ok := decodeCursor(c)
		if !ok {
			api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "malformed cursor"))
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
	var out api.PollPage
	if len(polls) > limit {
		last := polls[limit-1]
		out.NextCursor = encodeCursor(pageKey{last.OpensAt, last.ID})
		polls = polls[:limit]
	}
	views := make([]api.PollView, 0, len(polls))
	for _, d := range polls {
		v, err := h.View(d.ID, api.IsAdmin(r))
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		views = append(views, v)
	}
	out.Polls = views
	api.WriteJSON(w, r, http.StatusOK, out)
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
func (h *Host) HandleGetPoll(w http.ResponseWriter, r *http.Request) {
	h.writeView(w, r, http.StatusOK, r.PathValue("poll"))
}

// HandleClosePoll serves POST /v1/polls/{poll}/close (admin): the poll
// closes now, unless it already closed earlier. The close is a newer write
// of the poll's definition, replicated like any other.
//
// The close is answered once it holds everywhere it can be known: this
// node and every full node that confirmed it have answered each vote they
// read under the old close (Config.Closed), so no "accepted" comes after
// this answer from them; the answer's "close" names any that did not
// confirm.
func (h *Host) HandleClosePoll(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("poll")
	changed, err := h.amendPoll(id, notParked(func(def *poll.Definition, nowMs int64) (bool, error) {
		if nowMs >= def.ClosesAt {
			return false, nil
		}
		def.ClosesAt = max(nowMs+1, def.OpensAt+1) // after every vote stamped before the close, in its millisecond too
		return true, nil
	}))
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	var report *api.CloseReport
	if changed && h.cfg.Closed != nil {
		report = h.cfg.Closed(r.Context(), id)
	}
	v, err := h.View(id, true)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	v.Close = report
	api.WriteJSON(w, r, http.StatusOK, v)
}

func (h *Host) writeView(w http.ResponseWriter, r *http.Request, status int, id string) {
	// The admin endpoints (create, close, reveal, extend) are the host's.
	v, err := h.View(id, api.IsAdmin(r) || r.Method == http.MethodPost)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, status, v)
}
