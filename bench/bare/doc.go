// Command bare is the bare-HTTP ceiling of the ingest benchmark: the same
// request shape as POST /v1/polls/{poll}/votes, decoded with the same
// decoder (ingest.DecodeVotes) and acknowledged with the same JSON, but
// nothing else — no ledger, no counters, no limits. It is the machine's
// limit for this request shape, measured with the same generator.
//
//	go run ./bench/bare --addr 127.0.0.1:18090
package main
