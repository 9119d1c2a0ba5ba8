package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"tally/api"
	"tally/quiz"
)

// CreateQuiz creates a quiz (admin): its questions, each a poll, parked
// until the host starts them.
func (c *Client) CreateQuiz(ctx context.Context, q quiz.Quiz) (api.QuizView, error) {
	var v api.QuizView
	err := c.call(ctx, http.MethodPost, path("quizzes"), nil, q, &v)
	return v, err
}

// Quiz returns a quiz as the node shows it (the host, with the admin
// token, sees every question).
func (c *Client) Quiz(ctx context.Context, id string) (api.QuizView, error) {
	var v api.QuizView
	err := c.call(ctx, http.MethodGet, path("quizzes", id), nil, nil, &v)
	return v, err
}

// Host's steps of a quiz (admin), docs/quiz.md.
const (
	QuizStart  = "start"  // the next question opens now, for its time limit
	QuizClose  = "close"  // the open question closes before its limit
	QuizReveal = "reveal" // the latest started question shows its answer and counts
	QuizEnd    = "end"    // close the open question, skip the rest
)

// QuizStep takes one of the host's steps (QuizStart, QuizClose,
// QuizReveal, QuizEnd) and returns the quiz after it.
func (c *Client) QuizStep(ctx context.Context, id, step string) (api.QuizView, error) {
	var v api.QuizView
	err := c.call(ctx, http.MethodPost, path("quizzes", id, step), nil, struct{}{}, &v)
	return v, err
}

// Leaderboard returns a quiz's standings over its certified questions:
// the top n (1-100; 0: the node's 10) and, when participant is set, that
// participant's own standing.
func (c *Client) Leaderboard(ctx context.Context, id string, top int, participant string) (api.Leaderboard, error) {
	q := url.Values{}
	if top != 0 {
		q.Set("top", strconv.Itoa(top))
	}
	if participant != "" {
		q.Set("participant", participant)
	}
	var lb api.Leaderboard
	err := c.call(ctx, http.MethodGet, path("quizzes", id, "leaderboard"), q, nil, &lb)
	return lb, err
}
