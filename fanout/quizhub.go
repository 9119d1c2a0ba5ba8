package fanout

import (
	"bytes"
	"cmp"
	"errors"
	"slices"
	"strings"
	"time"

	"tally/api"
	"tally/poll"
	"tally/quiz"
	"tally/state"
)

// A quiz's stream (GET /v1/quizzes/{quiz}/live) follows the whole quiz on
// one socket: which question is on, its deadline, its correct options and
// counts once revealed, the top of the leaderboard, and — to each
// participant alone — their own rank and score. A participant joins once
// and answers every question on it; the node times each answer from the
// moment it wrote that question's first open frame to the socket.
//
// Its hub works as a poll's does: one encoding per tick when something
// changed, latest frame wins. The personal standings are the exception,
// one small frame per participant, and only when the ranking changes (a
// question certified and revealed: a few times per quiz).

// Frame types of a quiz's stream besides heartbeat, ack and error.
const (
	TypeQuiz     = "quiz"
	TypeStanding = "standing"
)

// QuizMessage is a frame of a quiz's stream.
type QuizMessage struct {
	Type   string `json:"type"` // quiz or heartbeat
	Quiz   string `json:"quiz"`
	Seq    uint64 `json:"seq"`
	AsOfMs int64  `json:"as_of_ms"` // the server's clock: pages count down by it
	Region string `json:"region,omitempty"`
	Title  string `json:"title,omitempty"`
	Status string `json:"status,omitempty"` // ready, question, between, ended
	// Current is the index of the open question; Started and Total count
	// the questions.
	Current *int `json:"current,omitempty"`
	Started int  `json:"started"`
	Total   int  `json:"total"`
	// Joined is how many participants have the quiz open across the
	// cluster (sockets that named their participant, one per participant
	// at each node): the lobby's count.
	Joined int64 `json:"joined"`
	// Newest are the display names of the newest counted participants
	// across the cluster (each node's own newest travel in the gossip with
	// its count), newest first, at most state.MaxJoiners, while the quiz is
	// in its lobby: the studio screen shows them as they join.
	Newest []string `json:"newest,omitempty"`
	// Question is the open question, or the last one started: what a
	// participant's screen shows. Correct and Totals once revealed.
	Question *api.QuestionView `json:"question,omitempty"`
	// The top of the leaderboard over the certified, revealed questions,
	// how many are ranked, the whole ranking's digest, and whether it is
	// final (every question closed and counted).
	Leaderboard       []quiz.Standing `json:"leaderboard,omitempty"`
	Participants      int             `json:"participants,omitempty"`
	LeaderboardDigest string          `json:"leaderboard_digest,omitempty"`
	LeaderboardFinal  bool            `json:"leaderboard_final,omitempty"`
}

// StandingMessage is a participant's own standing, sent to them alone
// when they join and whenever the ranking changes.
type StandingMessage struct {
	Type              string         `json:"type"` // standing
	Quiz              string         `json:"quiz"`
	LeaderboardDigest string         `json:"leaderboard_digest"`
	Participants      int            `json:"participants"`
	You               *quiz.Standing `json:"you"` // null: no counted answer yet
}

// quizHub is the stream of one quiz (GET /v1/quizzes/{quiz}/live).
type quizHub struct {
	*hub
	quiz string
	// The last frame's content, and the ranking it showed.
	lastQuiz    []byte
	lastAnswers int64
	lastJoined  int64
	lastNewest  string
	answersAt   time.Time // when a frame last went out for a new answer count
	ranking     Standings
}

// quizKey is a quiz hub's key in Server.hubs; no poll id has a slash.
func quizKey(id string) string { return "quiz/" + id }

func newQuizHub(s *Server, quizID string) *hub {
	h := &hub{s: s, key: quizKey(quizID)}
	h.stream = &quizHub{hub: h, quiz: quizID}
	return h
}

// leave withdraws this node's participants from the quiz's count.
func (h *quizHub) leave() {
	if first, ok := h.firstQuestion(); ok {
		h.s.src.Audience.Set(first, 0, h.s.cfg.Now().UnixMilli())
		h.s.src.Audience.SetJoiners(first, []state.Joiner{}, h.s.cfg.Now().UnixMilli())
	}
}

// firstQuestion is the poll under which the quiz's participants are
// counted and spread with the gossip (a quiz has no state of its own:
// its questions are polls). The first question's own poll stream does not
// report viewers (pollHub.tick), so the count is the quiz's alone.
func (h *quizHub) firstQuestion() (string, bool) {
	qs := h.s.src.Defs.QuizQuestions(h.quiz)
	if len(qs) == 0 {
		return "", false
	}
	return qs[0].ID, true
}

// participants counts the distinct participants among viewers (a phone
// with two tabs open is one), those whose join counted only: a script
// that opens sockets and names made-up participants adds nothing where
// tokens are in use. With names (the lobby) it also returns, in the same
// pass, the newest of them who gave a display name, newest first, each by
// their latest join, at most state.MaxJoiners: this node's report to the
// cluster.
func participants(viewers []*viewer, names bool) (int64, []state.Joiner) {
	seen := make(map[string]state.Joiner, len(viewers))
	for _, v := range viewers {
		v.mu.Lock()
		if v.participant != "" && v.counted {
			if cur, ok := seen[v.participant]; !ok || v.name != "" && (cur.Name == "" || v.joinSeq > cur.Seq) {
				seen[v.participant] = state.Joiner{Name: v.name, AtMs: v.joinedMs, Seq: v.joinSeq, Holder: v.holder}
			}
		}
		v.mu.Unlock()
	}
	if !names {
		return int64(len(seen)), nil
	}
	newest := make([]state.Joiner, 0, len(seen))
	for _, j := range seen {
		if j.Name != "" {
			newest = append(newest, j)
		}
	}
	slices.SortFunc(newest, func(a, b state.Joiner) int { return cmp.Compare(b.Seq, a.Seq) })
	return int64(len(seen)), newest[:min(len(newest), state.MaxJoiners)]
}

// answersEvery bounds how often a new answer count alone sends a frame.
const answersEvery = time.Second

// tick reads the quiz once and, when it changed, encodes one frame
// for every viewer; when the ranking changed, each participant's own.
func (h *quizHub) tick() {
	now := h.s.cfg.Now()
	qv, ok := api.QuizOf(h.s.src.Quizzes, h.quiz, false, now.UnixMilli())
	if !ok {
		return
	}
	m := &QuizMessage{Type: TypeQuiz, Quiz: h.quiz, Region: h.s.cfg.Region, Title: qv.Title, Status: qv.Status,
		Current: qv.Current, Started: qv.Started, Total: qv.Total}
	shown := ""
	if n := len(qv.Questions); n > 0 {
		q := qv.Questions[n-1] // the started ones, in order: the open one is the last
		m.Question = &q
		if q.Status == poll.Open {
			shown = q.Poll
		}
	}
	var rk Standings
	if h.s.cfg.Standings != nil {
		rk = h.s.cfg.Standings(h.quiz)
		m.Leaderboard, m.Participants, m.LeaderboardDigest, m.LeaderboardFinal = rk.Top, rk.Participants, rk.Digest, rk.Final
	}
	h.mu.Lock()
	viewers := make([]*viewer, 0, len(h.viewers))
	for v := range h.viewers {
		viewers = append(viewers, v)
	}
	h.mu.Unlock()
	h.audience(m, viewers, qv.Status == "ready", now.UnixMilli())
	// What the frame says, but for the answer and participant counts:
	// those change with every answer and every phone, and go out at most
	// once a second.
	answers, count, names := int64(0), m.Joined, m.Newest
	if m.Question != nil {
		answers, m.Question.Answers = m.Question.Answers, 0
	}
	m.Joined, m.Newest = 0, nil
	content := encode(m)
	if m.Question != nil {
		m.Question.Answers = answers
	}
	m.Joined, m.Newest = count, names
	namesKey := strings.Join(names, "\x00")

	h.mu.Lock()
	newRanking := rk.Digest != h.ranking.Digest
	h.ranking = rk
	changed := h.cur == nil || !bytes.Equal(content, h.lastQuiz)
	recount := !changed && (answers != h.lastAnswers || count != h.lastJoined || namesKey != h.lastNewest) && now.Sub(h.answersAt) >= answersEvery
	var f *frame
	switch {
	case changed || recount:
		h.seq++
		m.Seq, m.AsOfMs = h.seq, now.UnixMilli()
		f = &frame{seq: h.seq, snapshot: encode(m), shown: shown}
		h.s.m.encoded.Add(float64(len(f.snapshot)))
		h.cur, h.lastQuiz, h.since, h.answersAt = f, content, now, now
		h.lastAnswers, h.lastJoined, h.lastNewest = answers, count, namesKey
	case now.Sub(h.since) >= h.s.cfg.Heartbeat:
		h.since = now
		f = &frame{seq: h.seq, beat: true, shown: shown,
			snapshot: encode(&QuizMessage{Type: TypeHeartbeat, Quiz: h.quiz, Seq: h.seq, AsOfMs: now.UnixMilli(), Started: qv.Started, Total: qv.Total})}
	}
	h.mu.Unlock()
	if f != nil {
		for _, v := range viewers {
			h.s.deliver(v, f)
		}
	}
	if newRanking {
		for _, v := range viewers {
			h.sendStanding(v, rk)
		}
	}
}

// audience reports this node's participants among viewers (and, in the
// lobby, the newest who joined) to the cluster, and sets m's counts of
// the whole cluster's.
func (h *quizHub) audience(m *QuizMessage, viewers []*viewer, lobby bool, nowMs int64) {
	first, ok := h.firstQuestion()
	if !ok {
		return
	}
	n, newest := participants(viewers, lobby)
	h.s.src.Audience.Set(first, n, nowMs)
	m.Joined = h.s.src.Audience.Count(first, nowMs)
	if lobby {
		h.s.src.Audience.SetJoiners(first, newest, nowMs)
		m.Newest = h.s.src.Audience.Joiners(first, nowMs)
	}
}

// sendStanding queues a participant's own standing under rk, if the
// viewer said who they are and there is a ranking.
func (h *quizHub) sendStanding(v *viewer, rk Standings) {
	v.mu.Lock()
	voter := v.participant
	v.mu.Unlock()
	if voter == "" || rk.Digest == "" || rk.Of == nil {
		return
	}
	msg := StandingMessage{Type: TypeStanding, Quiz: h.quiz, LeaderboardDigest: rk.Digest, Participants: rk.Participants}
	if s, ok := rk.Of(voter); ok {
		msg.You = &s
	}
	if v.offerPersonal(encode(&msg)) {
		h.s.enqueue(v)
	}
}

// takeName takes the display name (in its normal form) a join gives for
// voter among the quiz's names (state.Names.Claim), only checks it for a
// join that does not count (whose name never shows): a name that looks
// like another participant's is a 400 saying so.
func (h *quizHub) takeName(voter, name string, counted bool) error {
	if name == "" {
		return nil
	}
	take := h.s.src.Names.Check
	if counted {
		take = h.s.src.Names.Claim
	}
	err := take(h.quiz, voter, name)
	if errors.Is(err, state.ErrLookAlike) {
		return api.LookAlikeName(name)
	}
	return err
}

// setParticipant records who a quiz stream's viewer is (and the name
// they go by) and sends them their standing at once.
func (h *quizHub) setParticipant(v *viewer, voter, name string, counted bool) {
	holder := h.s.src.Hash(voter)
	v.mu.Lock()
	if v.participant != voter || v.name != name || v.joinSeq == 0 {
		v.joinSeq, v.joinedMs = h.s.joins.Add(1), h.s.cfg.Now().UnixMilli()
	}
	v.participant, v.counted, v.name, v.holder = voter, counted, name, holder
	shownPoll, shownMs := v.shownPoll, v.shownMs
	v.mu.Unlock()
	if shownPoll != "" && shownMs > 0 {
		// Joined after the question reached this socket: the clock
		// started then.
		h.s.src.MarkShown(shownPoll, voter, shownMs)
	}
	h.mu.Lock()
	rk := h.ranking
	h.mu.Unlock()
	h.sendStanding(v, rk)
}
