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
//
// It also serves GET /v1/polls/{poll}/live: the bare socket reader, the
// floor of a vote on a live WebSocket (issue 61) as --store none, what
// tally load --socket sends to a node's live stream answered by a
// minimal hand-written RFC 6455 server (socket.go) — the handshake by
// hand and a hijack, one goroutine per socket reading its frames into a
// reused buffer and unmasking them in place, pings answered, closes
// echoed; each message decoded in one pass by the node's decoder
// (api.Unmarshal, api.CheckVotes), each vote handed to the store, and
// an ack of the node's shape (api.SocketReply with an api.VoteResponse)
// appended by hand into a reused buffer and written as one frame. No
// snapshot, no frames of the poll, no limits but --max-message and
// --max-sockets. bench/relay.sh sets the edge's CPU per socket vote
// beside it.
package main
