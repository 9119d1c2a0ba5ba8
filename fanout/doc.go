// Package fanout pushes each poll's live tally to its viewers over
// WebSocket (coder/websocket) and Server-Sent Events.
//
// A hub is one stream's viewer set and its ticking; what its frames hold
// is its stream's: a pollHub (hub.go) for a poll, a quizHub (quizhub.go)
// for a whole quiz. One hub per poll with viewers reads the poll's tally
// once per tick. When
// something changed it encodes two frames, once each, whatever the number
// of viewers: a full snapshot and a diff holding only the changed options.
// Every viewer holds at most one pending frame: a newer one replaces it
// (latest wins), and a viewer that received seq n-1 gets the diff, any
// other the snapshot — so a slow viewer skips frames but is never wrong.
// A small pool of shared writer goroutines writes pending frames, each
// write with a deadline; a viewer whose write fails or times out is
// disconnected as slow. Nothing changed: nothing is sent but a heartbeat.
//
// A viewer costs the goroutine net/http gives its connection, which reads
// the socket (and takes votes sent on it), plus, for a quiz participant,
// one that measures the round trip; no writer of its own. Hubs start with their
// first viewer and stop with their last. Server owns every goroutine it
// starts; Close stops them and disconnects every viewer.
//
// A quiz's stream works the same way over a whole quiz: one
// frame per tick when the quiz changed, to every participant, plus each
// participant's own standing, one small frame each, when the ranking
// changes.
//
// It imports api, crdt, poll, quiz and state of this module; votes
// arriving on a socket go to the Voter interface, which node fills with
// the ingest pipeline.
package fanout
