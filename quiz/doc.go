// Package quiz holds the rules of quiz mode that every part of Tally must
// agree on: what a quiz is (questions with correct options, a time limit
// and points), how an answer is scored from the time the serving node
// measured, and how a leaderboard is ranked, ties included.
//
// It is a leaf: ingest scores answers with it as they arrive, the ledger
// records the scores, and the auditor's tool re-derives every score with
// it from the exports. docs/quiz.md states the same rules for people.
package quiz
