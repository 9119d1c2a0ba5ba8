// Package api holds what every HTTP handler of Tally shares: the error
// shape of the v1 API ({"error":{"code","message"}} with a fitting status),
// strict JSON request decoding, JSON responses, and the JSON shapes of the
// API's resources — polls and quizzes (views.go), certified results and
// leaderboards (result.go) — which the handlers answer with and clients
// decode, so cmd/tally imports no server package. It imports ledger, poll
// and quiz of this module and nothing else.
package api
