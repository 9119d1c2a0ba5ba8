// Command usual is the comparison stack of the ingest benchmark: the same
// HTTP request shape as POST /v1/polls/{poll}/votes, decoded with the same
// decoder, in front of what users would pick instead of Tally — or in front
// of nothing (--store none), the bare-HTTP ceiling for this request shape.
//
//	go run ./bench/usual --store none --addr 127.0.0.1:18090
//	go run ./bench/usual --store redis --redis 127.0.0.1:6379 --addr 127.0.0.1:18091
//	go run ./bench/usual --store postgres --postgres postgres://…  --addr 127.0.0.1:18092
//
// redis: one Lua script per vote, as a typical single-server design does it
// (a token bucket per client IP, ZINCRBY on a ranking, INCRBY on the totals
// and on a per-second bucket). postgres: the naive design, one
// `UPDATE options SET votes = votes + 1` per vote.
package main
