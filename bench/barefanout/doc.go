// Command barefanout is the floor of the fan-out benchmark: a minimal Go
// program that holds the same number of WebSockets as a node and writes
// the same pre-encoded frame to each at the same rate with plain
// net.Conn writes. Its CPU per frame delivered is what the node's
// fan-out is compared against (bench/fanout.sh: node / bare, issue 61).
//
//	go run ./bench/barefanout --addr 127.0.0.1:18190 [--poll demo] [--tick 250ms] [--max-conns 20000]
//
// What it answers: GET /v1/polls/{poll}/live, the path `tally watch
// --swarm` opens, with a hand-written RFC 6455 server handshake (Upgrade,
// Connection, Sec-WebSocket-Version 13 and a 16-byte Sec-WebSocket-Key
// checked; 101 with Sec-WebSocket-Accept = base64(sha1(key + GUID)); no
// subprotocol and no extension, as the node: a client offering
// permessage-deflate gets plain frames). The swarm's votes (POST
// …/votes, 40 a second) are read and answered 204 without being
// counted, and GET /readyz says 200 once it listens.
//
// The handshake goes through net/http and http.Hijacker rather than a
// raw listener: it is the node's accept path, the swarm's votes arrive
// on the same address and get a real HTTP answer, and none of it is in
// the figure that matters — the swarm reads the server's CPU only once
// every viewer is connected. After the hijack nothing of net/http is
// kept: not its goroutine (the handler returns), not its 4 KiB buffers
// (dropped unless the client sent bytes past its request, which a
// WebSocket client does not before the 101), not the request. What a
// connection costs from then on is the floor: the *net.TCPConn, one
// reading goroutine with a 64-byte buffer, and one entry in the set.
//
// The frame: one unmasked text frame, header and payload built once at
// start. Its payload is an api.Frame of type diff for the poll, shaped
// like the node's diffs at 40 votes/s (four changed totals, the rate, the
// viewer count, the poll's times, the leader, the freshness vector;
// measured node diffs of the demo poll are 276–434 bytes, this one is
// 311). The swarm counts seq gaps and measures lag from as_of_ms,
// so each tick writes those two numbers into the same bytes in place:
// both sit in fixed-width slots (10 and 13 characters), left-aligned and
// padded with spaces — JSON allows whitespace before the comma, and the
// swarm reads the digits after the key — so seq counts 1, 2, 3, … like
// the node's and nothing is allocated or re-encoded. The swarm needs no
// first snapshot (it only counts, skips heartbeats and compares seq with
// the previous one it saw), so none is sent: every frame is a tick's.
//
// The writing: one goroutine, once per tick, patches the frame and then
// writes it to every connection in one loop of conn.Write, one write
// system call per connection, with no deadline, no queue, no per-viewer
// state and no handoff between goroutines. That is the least CPU a
// frame delivered can take in Go with one write per socket, which is
// what the node does too; on two cores more writers only add scheduling
// (--writers N splits the set over N goroutines, for comparison: with
// 1,000 viewers two writers took 14.75–15.25 µs a frame, one 14.50). A connection whose write fails is closed and dropped. A
// peer that stops reading would block the loop once its socket buffer is
// full; a watchdog (the node's design: nothing per write but a counter)
// closes a connection stuck in one write for --write-timeout, which ends
// the write.
//
// The reading: a goroutine per connection, as in the node, reading frame
// headers through a 64-byte bufio.Reader and discarding payloads; a
// close frame is answered with a close frame and the connection closed.
// Pings are not answered (the swarm sends none). A read error, EOF or
// close removes the connection from the set the writer copies.
//
// Bounded: at most --max-conns connections (the next are answered 503);
// SIGINT or SIGTERM closes every connection and exits, printing to stderr
// the connections, frames written and connections dropped.
package main
