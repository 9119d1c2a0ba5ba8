// Package admin runs the lifecycle of poll and quiz definitions: the
// host's endpoints that create, list, show, close, extend and reveal polls
// (polls.go, amend.go), run a quiz question by question (quizzes.go), and
// export a poll's ledger (ledger.go).
//
// Every change a host makes is a newer write of a poll's definition into
// package state, stamped by the hybrid logical clock and replicated like
// any other write; nothing here counts votes (package ingest does) or
// certifies a result (package certify does). A quiz is a sequence of
// polls, one per question, that the host starts one at a time
// (docs/quiz.md).
//
// Which endpoints need the admin token is the router's business (package
// node); a handler here treats a POST as the host's.
//
// Host is safe for concurrent use. It starts no goroutines.
package admin
