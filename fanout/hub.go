package fanout

import (
	"sync"
	"time"

	"tally/poll"
	"tally/quiz"
	"tally/state"
)

// hub serves the viewers of one poll, or of one quiz (quizhub.go).
type hub struct {
	s      *Server
	key    string // in Server.hubs: the poll id, or quizKey(quiz)
	stream stream // what the frames hold: a *pollHub or a *quizHub
	stop   chan struct{}

	tickMu sync.Mutex // one tick at a time: reads of the tally must be applied in order

	mu      sync.Mutex
	viewers map[*viewer]struct{}
	seq     uint64
	cur     *frame    // the newest frame, for viewers that join
	since   time.Time // when the last frame (or heartbeat) went out
}

// stream is one kind of live stream: it reads its source at each tick and
// hands the frames to its hub's viewers.
type stream interface {
	// tick reads the source once and, when something changed, delivers
	// one frame to every viewer. It runs under the hub's tickMu.
	tick()
	// leave is told that the last viewer left.
	leave()
}

// pollHub is the stream of one poll (GET /v1/polls/{poll}/live).
type pollHub struct {
	*hub
	poll    string
	last    view
	history []sample // records over the last minute, for votes per minute
}

func newPollHub(s *Server, pollID string) *hub {
	h := &hub{s: s, key: pollID}
	h.stream = &pollHub{hub: h, poll: pollID}
	return h
}

// leave withdraws this node's viewers from the poll's count (a quiz
// question's count is its quiz's participants: quizHub.firstQuestion).
func (h *pollHub) leave() {
	if def, ok := h.s.src.Defs.Poll(h.poll); ok && def.Quiz != nil {
		return
	}
	h.s.src.Audience.Set(h.poll, 0, h.s.cfg.Now().UnixMilli())
}

type sample struct {
	at      time.Time
	records uint64
}

// add registers a viewer and queues the current snapshot for it.
func (h *hub) add(v *viewer) {
	h.mu.Lock()
	h.viewers[v] = struct{}{}
	f := h.cur
	h.mu.Unlock()
	h.s.m.viewers.WithLabelValues(v.transport).Inc()
	if f != nil {
		h.s.deliver(v, &frame{seq: f.seq, snapshot: f.snapshot, shown: f.shown})
	}
}

// remove disconnects and forgets a viewer; the last one out stops the hub.
// It reports whether this call disconnected it.
func (h *hub) remove(v *viewer, reason string) bool {
	if !v.disconnect(reason) {
		return false
	}
	h.s.m.viewers.WithLabelValues(v.transport).Dec()
	h.s.release(v)
	h.mu.Lock()
	delete(h.viewers, v)
	empty := len(h.viewers) == 0
	h.mu.Unlock()
	if empty {
		h.s.dropHubIfEmpty(h)
	}
	return true
}

// run ticks until stopped.
func (h *hub) run() {
	defer h.s.wg.Done()
	t := time.NewTimer(h.s.pacer.tick())
	defer t.Stop()
	for { // join has ticked once already
		select {
		case <-h.stop:
			return
		case <-h.s.ctx.Done():
			return
		case <-t.C:
			h.tick()
			t.Reset(h.s.pacer.tick()) // stretched under load (pace.go)
		}
	}
}

// tick runs one tick of the hub's stream.
func (h *hub) tick() {
	h.tickMu.Lock()
	defer h.tickMu.Unlock()
	start := time.Now()
	defer func() { h.s.m.tick.Observe(time.Since(start).Seconds()) }()
	h.stream.tick()
}

// read takes the poll's view at now: its definition, counts (the
// certificate's once certified), and, for a quiz question, the quiz's
// ranking and whether the question is on (shown). ok is false when the
// poll or its tally is gone.
func (h *pollHub) read(now time.Time) (cur view, def poll.Definition, cert state.Certificate, board []quiz.Standing, shown string, ok bool) {
	def, ok = h.s.src.Defs.Poll(h.poll)
	if !ok {
		return
	}
	t, err := h.s.src.Tally(h.poll)
	if err != nil {
		return cur, def, cert, nil, "", false
	}
	cert, final := h.s.src.Defs.Certificate(h.poll)
	final = final && cert.Status == state.Reconciled
	cur = view{status: string(def.StatusAt(now.UnixMilli(), final)), totals: make(map[string]int64, len(def.Options)), final: final, hidden: def.Hidden}
	for _, o := range def.Options {
		if final {
			cur.totals[o.ID] = int64(cert.Totals[o.ID]) // the certified count, not the live one
		} else {
			cur.totals[o.ID] = t.Value(o.ID)
		}
		cur.total += cur.totals[o.ID]
	}
	for _, n := range t.RecordCounts() {
		cur.records += n
	}
	shown = "" // a quiz question's time starts with its first open frame
	if def.Quiz != nil {
		if h.s.cfg.Standings != nil {
			rk := h.s.cfg.Standings(def.Quiz.Quiz)
			board, cur.board = rk.Top, rk.Digest
		}
		if cur.status == string(poll.Open) {
			shown = h.poll
		}
	}
	return cur, def, cert, board, shown, true
}

// tick reads the poll once and, when it changed, encodes one snapshot and
// one diff for every viewer.
func (h *pollHub) tick() {
	now := h.s.cfg.Now()
	cur, def, cert, board, shown, ok := h.read(now)
	if !ok {
		return
	}

	h.mu.Lock()
	h.history = append(h.history, sample{now, cur.records})
	for len(h.history) > 1 && now.Sub(h.history[0].at) > time.Minute {
		h.history = h.history[1:]
	}
	vpm := 0.0
	if first := h.history[0]; now.Sub(first.at) > 0 {
		vpm = float64(cur.records-first.records) / now.Sub(first.at).Minutes()
	}
	viewers := make([]*viewer, 0, len(h.viewers))
	for v := range h.viewers {
		viewers = append(viewers, v)
	}
	if def.Quiz == nil { // a quiz question's count is its quiz's participants
		h.s.src.Audience.Set(h.poll, int64(len(viewers)), now.UnixMilli())
	}
	cur.viewers = h.s.src.Audience.Count(h.poll, now.UnixMilli())
	var regions map[string]int64
	if h.s.cfg.Freshness != nil {
		regions = h.s.cfg.Freshness()
	}
	// A change of the viewer count alone goes out at most once a second.
	// A hidden poll's counts changing sends nothing: a frame per vote would
	// tell its viewers when votes arrive.
	counts := !cur.hidden && len(changedOptions(h.last.totals, cur.totals)) > 0
	changed := h.cur == nil || cur.status != h.last.status || cur.final != h.last.final || cur.hidden != h.last.hidden || cur.board != h.last.board ||
		counts || cur.viewers != h.last.viewers && now.Sub(h.since) >= time.Second
	var f *frame
	switch {
	case changed:
		h.seq++
		f = h.encodeChange(cur, &def, cert, board, vpm, regions, shown, now)
		h.cur, h.last, h.since = f, cur, now
	case now.Sub(h.since) >= h.s.cfg.Heartbeat:
		h.since = now
		beat := &Message{
			Type: TypeHeartbeat, Poll: h.poll, Seq: h.seq, AsOfMs: now.UnixMilli(), TickMs: h.s.pacer.tick().Milliseconds(), Status: cur.status,
			Total: cur.total, VotesPerMin: vpm, Viewers: cur.viewers, Regions: regions,
		}
		if cur.hidden {
			hide(beat)
		}
		f = &frame{seq: h.seq, beat: true, snapshot: encode(beat), shown: shown}
	}
	h.mu.Unlock()
	if f == nil {
		return
	}
	for _, v := range viewers {
		h.s.deliver(v, f)
	}
}

// encodeChange encodes the snapshot of the poll's new view cur, numbered
// h.seq, and the diff from the last one where a viewer may apply it. It
// runs under h.mu.
func (h *pollHub) encodeChange(cur view, def *poll.Definition, cert state.Certificate, board []quiz.Standing, vpm float64, regions map[string]int64, shown string, now time.Time) *frame {
	typ := TypeSnapshot
	if cur.final {
		typ = TypeFinal
	}
	snap := &Message{
		Type: typ, Poll: h.poll, Seq: h.seq, AsOfMs: now.UnixMilli(), TickMs: h.s.pacer.tick().Milliseconds(), Status: cur.status,
		Totals: cur.totals, Total: cur.total, VotesPerMin: vpm, Viewers: cur.viewers,
		Region: h.s.cfg.Region, Question: def.Question, OpensAt: def.OpensAt, ClosesAt: def.ClosesAt, Event: def.Event,
		Leader: leader(cur.totals), Events: events(h.last, cur), Regions: regions,
		Leaderboard: board, LeaderboardDigest: cur.board,
	}
	for _, o := range def.Options {
		snap.Options = append(snap.Options, OptionInfo{ID: o.ID, Label: o.Label})
	}
	if cur.final {
		snap.Digest = cert.Digest
	}
	if cur.hidden {
		hide(snap)
	}
	f := &frame{seq: h.seq, snapshot: encode(snap), shown: shown}
	// The final frame, and the one that reveals a hidden poll, go whole
	// to everyone: a diff from a frame without counts would leave the
	// options it does not name at zero on every screen.
	if h.cur != nil && !cur.final && cur.hidden == h.last.hidden {
		diff := *snap
		diff.Type, diff.Totals, diff.Options, diff.Question, diff.Region = TypeDiff, changedOptions(h.last.totals, cur.totals), nil, "", ""
		if cur.board == h.last.board {
			diff.Leaderboard, diff.LeaderboardDigest = nil, ""
		}
		if cur.hidden {
			diff.Totals = nil
		}
		f.diff = encode(&diff)
		h.s.m.encoded.Add(float64(len(f.diff)))
	}
	h.s.m.encoded.Add(float64(len(f.snapshot)))
	return f
}

// resync queues the current snapshot for a viewer that saw a gap.
func (h *hub) resync(v *viewer) {
	v.resync()
	h.mu.Lock()
	f := h.cur
	h.mu.Unlock()
	if f != nil {
		h.s.deliver(v, &frame{seq: f.seq, snapshot: f.snapshot, shown: f.shown})
	}
}

// hide takes every count out of a frame of a hidden poll: the totals, the
// total, the leader and the events that would name one, the rate and the
// certified digest. What is left says the poll exists, its status and
// how many watch.
func hide(m *Message) {
	m.Hidden = true
	m.Totals, m.Total, m.Leader, m.Events, m.VotesPerMin, m.Digest = nil, 0, "", nil, 0, ""
}
