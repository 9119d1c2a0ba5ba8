// Package api holds what every HTTP handler of Tally shares: the error
// shape of the v1 API ({"error":{"code","message"}} with a fitting status),
// strict JSON request decoding, JSON responses, and the JSON of the API in
// one place — polls and quizzes (views.go, quizview.go), votes and voter
// sessions (votes.go), certified results and leaderboards (result.go), the
// cluster (cluster.go) and the live streams' frames and socket messages
// (live.go) — which the handlers answer with and package client decodes,
// so neither client nor cmd/tally imports a server package. It imports
// ledger, poll and quiz of this module and nothing else.
package api
