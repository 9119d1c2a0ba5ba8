package join

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"tally/api"
	"tally/ids"
	"tally/poll"
	"tally/state"
)

// rebuildEvery bounds how often the index is rebuilt.
const rebuildEvery = time.Second

type target struct{ kind, id string }

// index maps the codes of the polls, events and quizzes held to them.
type index struct {
	mu    sync.Mutex
	built time.Time
	codes map[string]target
}

// Codes resolves join codes against a node's state and serves the two
// endpoints.
type Codes struct {
	state *state.State
	now   func() time.Time
	index index
}

// New returns the join codes of st's polls, events and quizzes; now is the
// node's clock.
func New(st *state.State, now func() time.Time) *Codes {
	return &Codes{state: st, now: now}
}

// lookup returns what code names, rebuilding the index from polls when it
// is older than rebuildEvery.
func (x *index) lookup(code string, now time.Time, polls func() []poll.Definition) (target, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.codes == nil || now.Sub(x.built) >= rebuildEvery || now.Before(x.built) {
		x.codes = map[string]target{}
		add := func(kind, id string) {
			c := ids.JoinCode(kind, id)
			if _, taken := x.codes[c]; !taken { // a collision (1 in 729 million a pair): the first stands
				x.codes[c] = target{kind, id}
			}
		}
		for _, d := range polls() {
			add(ids.JoinPoll, d.ID)
			if d.Event != "" {
				add(ids.JoinEvent, d.Event)
			}
			if d.Quiz != nil {
				add(ids.JoinQuiz, d.Quiz.Quiz)
			}
		}
		x.built = now
	}
	t, ok := x.codes[code]
	return t, ok
}

// Resolve returns what a code names now: a poll viewers may see, an event
// with such a poll (and which is current), or a quiz.
func (c *Codes) Resolve(code string) (api.JoinView, bool) {
	now := c.now()
	t, ok := c.index.lookup(code, now, c.state.Defs.Polls)
	if !ok {
		return api.JoinView{}, false
	}
	v := api.JoinView{Code: code, Kind: t.kind, ID: t.id}
	nowMs := now.UnixMilli()
	switch t.kind {
	case ids.JoinPoll:
		if d, ok := c.state.Defs.Poll(t.id); !ok || d.Withheld(nowMs) {
			return api.JoinView{}, false
		}
		v.Path = "/#/poll/" + url.PathEscape(t.id)
	case ids.JoinEvent:
		cur, ok := currentPoll(c.state.Defs.Polls(), t.id, nowMs)
		if !ok {
			return api.JoinView{}, false
		}
		v.Poll, v.Path = cur, "/#/poll/"+url.PathEscape(cur)
	case ids.JoinQuiz:
		if _, ok := api.QuizOf(c.state.Quizzes, t.id, false, nowMs); !ok {
			return api.JoinView{}, false
		}
		v.Path = "/#/quiz/" + url.PathEscape(t.id)
	}
	return v, true
}

// currentPoll picks an event's current poll as the event views do
// (web/static/poll.js EventView): the open one that opened last, else the
// last to have opened, else the next to open; never one withheld.
func currentPoll(polls []poll.Definition, event string, nowMs int64) (string, bool) {
	var open, past, next []poll.Definition
	for _, d := range polls {
		if d.Event != event || d.Withheld(nowMs) {
			continue
		}
		switch d.StatusAt(nowMs, false) {
		case poll.Open:
			open = append(open, d)
		case poll.Scheduled:
			next = append(next, d)
		default:
			past = append(past, d)
		}
	}
	latest := func(a, b poll.Definition) int { // the latest opening first, then the greater id
		if c := cmp.Compare(b.OpensAt, a.OpensAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	}
	for _, set := range [][]poll.Definition{open, past} {
		if len(set) > 0 {
			return slices.MinFunc(set, latest).ID, true
		}
	}
	if len(next) > 0 {
		return slices.MaxFunc(next, latest).ID, true
	}
	return "", false
}

// ServeCode serves GET /v1/join/{code}: what the code names and the page
// to open.
func (c *Codes) ServeCode(w http.ResponseWriter, r *http.Request) {
	code, err := ids.ParseJoinCode(r.PathValue("code"))
	if err != nil {
		api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "%v", err))
		return
	}
	v, ok := c.Resolve(code)
	if !ok {
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodeJoinNotFound, "no poll, event or quiz has the code %s", code))
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	api.WriteJSON(w, r, http.StatusOK, v)
}

// ServePage serves GET /j/{code}: a redirect to the page the code names,
// or to the page's join form saying the code names nothing.
func (c *Codes) ServePage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	code, err := ids.ParseJoinCode(r.PathValue("code"))
	if err == nil {
		if v, ok := c.Resolve(code); ok {
			http.Redirect(w, r, v.Path, http.StatusFound)
			return
		}
	}
	http.Redirect(w, r, "/#/join/"+url.PathEscape(r.PathValue("code")), http.StatusFound)
}
