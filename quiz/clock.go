package quiz

// The quiz clock: how long a participant took to answer a question, as
// the serving node measures it on its own clock, never the client's
// (docs/quiz.md, Fairness). The rule lives here; the moments it reads are
// recorded where they happen: fanout marks when a socket was first shown
// an open question (viewer.markShown), state keeps, per question and
// participant, the earliest such moment on any socket (State.MarkShown),
// and ingest reads them when an answer arrives and ledgers the result
// (Pipeline.answer).

// AllowanceMs is how long after a question opened (its opens_at, the
// host's start) a node may still start a participant's clock: the
// delivery of the question to a far region and to the participant's
// socket (gossip, the fan-out tick, the write). A participant's time runs
// from the first moment the serving node showed them the question, but
// never from later than opens_at + AllowanceMs, so reading a question,
// waiting and answering from a fresh socket, region or restarted node
// gains at most AllowanceMs.
const AllowanceMs = 1000

// Moments are what the serving node knows of one participant and one
// question when their answer arrives, all in Unix ms on its own clock; 0
// means unknown.
type Moments struct {
	// Shown is when this node put the question on the answering socket,
	// or, for an answer over HTTP, when the question opened at this node.
	Shown int64
	// FirstShown is the earliest moment this node put the question on any
	// socket of the participant's.
	FirstShown int64
	// OpensAt is the question's opening, as every region knows it.
	OpensAt int64
	// Received is when the answer arrived.
	Received int64
}

// Elapsed is the answer's time in ms: from the earliest of Shown,
// FirstShown and OpensAt + AllowanceMs (Received when none is known) to
// Received, clamped to [0, limitMs]. A fresh socket, region or restart
// therefore never restarts the clock.
func Elapsed(m Moments, limitMs int64) int64 {
	start := m.Received
	if m.Shown > 0 {
		start = m.Shown
	}
	if m.FirstShown > 0 {
		start = min(start, m.FirstShown)
	}
	if m.OpensAt > 0 {
		start = min(start, m.OpensAt+AllowanceMs)
	}
	return min(max(m.Received-start, 0), max(limitMs, 0))
}
