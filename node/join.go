package node

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
)

// Join codes (ids.JoinCode) let a viewer type six characters instead of
// scanning: GET /v1/join/{code} says what a code names and the page to
// open; GET /j/{code} opens it (the address a screen prints). A node
// resolves a code by computing the codes of the polls, events and quizzes
// it holds; the index is rebuilt at most once a second, so a stranger
// trying codes costs a map lookup each.

// joinEvery bounds how often the index is rebuilt.
const joinEvery = time.Second

type joinTarget struct{ kind, id string }

type joinIndex struct {
	mu    sync.Mutex
	built time.Time
	codes map[string]joinTarget
}

// lookup returns what code names, rebuilding the index from polls when it
// is older than joinEvery.
func (x *joinIndex) lookup(code string, now time.Time, polls func() []poll.Definition) (joinTarget, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.codes == nil || now.Sub(x.built) >= joinEvery || now.Before(x.built) {
		x.codes = map[string]joinTarget{}
		add := func(kind, id string) {
			c := ids.JoinCode(kind, id)
			if _, taken := x.codes[c]; !taken { // a collision (1 in 729 million a pair): the first stands
				x.codes[c] = joinTarget{kind, id}
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

// resolveJoin returns what a code names now: a poll viewers may see, an
// event with such a poll (and which is current), or a quiz.
func (n *Node) resolveJoin(code string) (api.JoinView, bool) {
	now := n.cfg.Now()
	t, ok := n.joins.lookup(code, now, n.state.Polls)
	if !ok {
		return api.JoinView{}, false
	}
	v := api.JoinView{Code: code, Kind: t.kind, ID: t.id}
	nowMs := now.UnixMilli()
	switch t.kind {
	case ids.JoinPoll:
		if d, ok := n.state.Poll(t.id); !ok || d.Withheld(nowMs) {
			return api.JoinView{}, false
		}
		v.Path = "/#/poll/" + url.PathEscape(t.id)
	case ids.JoinEvent:
		cur, ok := currentPoll(n.state.Polls(), t.id, nowMs)
		if !ok {
			return api.JoinView{}, false
		}
		v.Poll, v.Path = cur, "/#/poll/"+url.PathEscape(cur)
	case ids.JoinQuiz:
		if _, ok := api.QuizOf(n.state, t.id, false, nowMs); !ok {
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

// handleJoin serves GET /v1/join/{code}.
func (n *Node) handleJoin(w http.ResponseWriter, r *http.Request) {
	code, err := ids.ParseJoinCode(r.PathValue("code"))
	if err != nil {
		api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "%v", err))
		return
	}
	v, ok := n.resolveJoin(code)
	if !ok {
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodeJoinNotFound, "no poll, event or quiz has the code %s", code))
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	api.WriteJSON(w, r, http.StatusOK, v)
}

// handleJoinPage serves GET /j/{code}: a redirect to the page the code
// names, or to the page's join form saying the code names nothing.
func (n *Node) handleJoinPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	code, err := ids.ParseJoinCode(r.PathValue("code"))
	if err == nil {
		if v, ok := n.resolveJoin(code); ok {
			http.Redirect(w, r, v.Path, http.StatusFound)
			return
		}
	}
	http.Redirect(w, r, "/#/join/"+url.PathEscape(r.PathValue("code")), http.StatusFound)
}
