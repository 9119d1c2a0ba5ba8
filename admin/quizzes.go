package admin

import (
	"errors"
	"fmt"
	"net/http"

	"tally/api"
	"tally/poll"
	"tally/quiz"
	"tally/state"
)

// A quiz is a sequence of quiz questions, each a poll (docs/quiz.md):
// created together, parked (not started, invisible to everyone but the
// host) until the host starts them one by one. Every region holds them
// (poll definitions replicate), so any full node can run the quiz.

// MaxQuizBody bounds a quiz definition: 100 questions of 8 options.
const MaxQuizBody = 256 << 10

// QuestionID is the poll id of a quiz's question i (from 0).
func QuestionID(quizID string, i int) string { return fmt.Sprintf("%s-%d", quizID, i+1) }

// quizQuestions returns the quiz's question definitions by index.
func (h *Host) quizQuestions(quizID string) []poll.Definition {
	return h.cfg.State.Defs.QuizQuestions(quizID)
}

// HandleCreateQuiz serves POST /v1/quizzes (admin): the quiz's questions
// are created parked and hidden.
func (h *Host) HandleCreateQuiz(w http.ResponseWriter, r *http.Request) {
	var q quiz.Quiz
	if err := api.DecodeJSON(w, r, MaxQuizBody, &q); err != nil {
		api.WriteError(w, r, err)
		return
	}
	q.Normalize()
	if err := q.Validate(); err != nil {
		api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "%v", err))
		return
	}
	if len(q.ID) > poll.MaxIDLen-4 { // room for "-100"
		api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "quiz id must be at most %d characters", poll.MaxIDLen-4))
		return
	}
	if _, exists := h.cfg.State.Defs.Poll(QuestionID(q.ID, 0)); exists {
		api.WriteError(w, r, api.Errorf(http.StatusConflict, api.CodeInvalidRequest, "quiz %q exists", q.ID))
		return
	}
	for i, qu := range q.Questions {
		ts, err := h.cfg.Clock.Now()
		if err != nil {
			api.WriteError(w, r, err)
			return
		}
		opens := ts.Wall // a placeholder until the question starts
		options := make([]poll.Option, len(qu.Options))
		for j, o := range qu.Options {
			options[j] = poll.Option{ID: o.ID, Label: o.Label}
		}
		def := poll.Definition{ID: QuestionID(q.ID, i), Question: qu.Text, Options: options,
			OpensAt: opens, ClosesAt: poll.AddMs(opens, qu.LimitMs), Hidden: true, Event: q.ID,
			Quiz: &poll.QuizQuestion{Quiz: q.ID, Title: q.Title, Index: i, Correct: qu.Correct, Points: qu.Points, LimitMs: qu.LimitMs}}
		if err := def.Validate(); err != nil {
			api.WriteError(w, r, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "question %d: %v", i+1, err))
			return
		}
		if _, err := h.cfg.State.Defs.PutPoll(def, ts); err != nil {
			if errors.Is(err, state.ErrTooManyPolls) {
				err = api.Errorf(http.StatusConflict, api.CodeTooManyPolls, "this node holds as many polls as it may (--max-polls); %d of the quiz's questions were created", i)
			}
			api.WriteError(w, r, err)
			return
		}
	}
	h.writeQuiz(w, r, http.StatusCreated, q.ID)
}

// HandleGetQuiz serves GET /v1/quizzes/{quiz}.
func (h *Host) HandleGetQuiz(w http.ResponseWriter, r *http.Request) {
	h.writeQuiz(w, r, http.StatusOK, r.PathValue("quiz"))
}

// HandleQuizStart serves POST /v1/quizzes/{quiz}/start (admin): the next
// question opens now, for its time limit, in every region.
func (h *Host) HandleQuizStart(w http.ResponseWriter, r *http.Request) {
	h.quizAction(w, r, func(qs []poll.Definition, now int64) error {
		for _, d := range qs {
			if d.StatusAt(now, false) == poll.Open {
				return api.Errorf(http.StatusConflict, api.CodePollNotClosed, "question %d is open; close it first", d.Quiz.Index+1)
			}
		}
		for _, d := range qs {
			if d.Parked() {
				_, err := h.amendPoll(d.ID, func(def *poll.Definition, nowMs int64) (bool, error) {
					def.OpensAt, def.ClosesAt = nowMs, poll.AddMs(nowMs, def.Quiz.LimitMs)
					def.Quiz.Started = true
					return true, nil
				})
				return err
			}
		}
		return api.Errorf(http.StatusConflict, api.CodeQuizEnded, "every question of the quiz has been started")
	})
}

// HandleQuizClose serves POST /v1/quizzes/{quiz}/close (admin): the open
// question closes now, before its time limit.
func (h *Host) HandleQuizClose(w http.ResponseWriter, r *http.Request) {
	h.quizAction(w, r, func(qs []poll.Definition, now int64) error {
		for _, d := range qs {
			if d.StatusAt(now, false) == poll.Open {
				changed, err := h.amendPoll(d.ID, func(def *poll.Definition, nowMs int64) (bool, error) {
					if nowMs >= def.ClosesAt {
						return false, nil
					}
					def.ClosesAt = max(nowMs+1, def.OpensAt+1) // after every vote stamped before the close, in its millisecond too
					return true, nil
				})
				if changed {
					h.settleClose(r, d.ID)
				}
				return err
			}
		}
		return api.Errorf(http.StatusConflict, api.CodePollClosed, "no question is open")
	})
}

// HandleQuizReveal serves POST /v1/quizzes/{quiz}/reveal (admin): the
// latest started question still hidden shows its correct options and its
// counts, and enters the leaderboard. With every started question
// revealed, nothing changes.
func (h *Host) HandleQuizReveal(w http.ResponseWriter, r *http.Request) {
	h.quizAction(w, r, func(qs []poll.Definition, now int64) error {
		started := false
		for i := len(qs) - 1; i >= 0; i-- {
			if qs[i].Parked() {
				continue
			}
			started = true
			if qs[i].Hidden {
				_, err := h.amendPoll(qs[i].ID, func(def *poll.Definition, _ int64) (bool, error) {
					changed := def.Hidden
					def.Hidden = false
					return changed, nil
				})
				return err
			}
		}
		if !started {
			return api.Errorf(http.StatusConflict, api.CodePollNotOpen, "no question has been started")
		}
		return nil
	})
}

// HandleQuizEnd serves POST /v1/quizzes/{quiz}/end (admin): the open
// question closes now and the questions never started are skipped (they
// close at once, unanswered, and stay unseen by all but the host).
// Ending an ended quiz changes nothing.
func (h *Host) HandleQuizEnd(w http.ResponseWriter, r *http.Request) {
	h.quizAction(w, r, func(qs []poll.Definition, now int64) error {
		for _, d := range qs {
			wasOpen := false
			changed, err := h.amendPoll(d.ID, func(def *poll.Definition, nowMs int64) (bool, error) {
				switch {
				case def.Parked():
					def.OpensAt, def.ClosesAt = nowMs-1, nowMs      // closed already: nobody can answer it
					def.Quiz.Started, def.Quiz.Skipped = true, true // never asked: the host alone sees it
					def.Hidden = false
				case nowMs < def.ClosesAt:
					def.ClosesAt = max(nowMs+1, def.OpensAt+1) // after every vote stamped before the close, in its millisecond too
					wasOpen = true
				default:
					return false, nil
				}
				return true, nil
			})
			if err != nil {
				return err
			}
			if changed && wasOpen {
				h.settleClose(r, d.ID)
			}
		}
		return nil
	})
}

// quizAction runs a host's action on a quiz and answers with its view.
func (h *Host) quizAction(w http.ResponseWriter, r *http.Request, act func(qs []poll.Definition, nowMs int64) error) {
	id := r.PathValue("quiz")
	qs := h.quizQuestions(id)
	if len(qs) == 0 {
		api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodeQuizNotFound, "no quiz %q", id))
		return
	}
	ts, err := h.cfg.Clock.Now()
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	if err := act(qs, ts.Wall); err != nil {
		api.WriteError(w, r, err)
		return
	}
	h.writeQuiz(w, r, http.StatusOK, id)
}

func (h *Host) writeQuiz(w http.ResponseWriter, r *http.Request, status int, id string) {
	v, err := h.QuizView(id, api.IsAdmin(r) || r.Method == http.MethodPost)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, r, status, v)
}

// QuizView returns a quiz as the API shows it; host says whether the host
// asks (and sees every question, correct options and counts included).
func (h *Host) QuizView(id string, host bool) (api.QuizView, error) {
	v, ok := api.QuizOf(h.cfg.State.Quizzes, id, host, h.cfg.Now().UnixMilli())
	if !ok {
		return api.QuizView{}, api.Errorf(http.StatusNotFound, api.CodeQuizNotFound, "no quiz %q", id)
	}
	return v, nil
}

// settleClose makes a question's early close hold before the host is
// answered, as a poll's close does (HandleClosePoll, Config.Closed).
func (h *Host) settleClose(r *http.Request, id string) {
	if h.cfg.Closed != nil {
		h.cfg.Closed(r.Context(), id)
	}
}
