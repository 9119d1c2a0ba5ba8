package gossip

import (
	"sync"
	"time"

	"tally/hlc"
)

// Every sealed message carries its sender's hybrid clock (Message.Sent),
// and the seal covers it. A message captured on the wire and sent again
// cannot rewrite counts (they merge by max), but it could make a dead
// region look fresh or bring back its viewers, which took the arrival
// time. So: freshness and viewer reports are stamped with the sender's
// time, not the arrival; a message older than maxMessageAge, or on the
// NATS or push/pull path no newer than the last one from its replica on
// that path, is a replay: dropped and counted (reason "replay").

// maxMessageAge is how far behind this node's clock a message's send
// time may be: far above delivery and the clocks' skew bound (5 s).
const maxMessageAge = 30 * time.Second

// maxOrdered bounds the (path, replica) pairs whose last send time is kept.
const maxOrdered = 4096

// order keeps the newest send time heard per (path, replica).
type order struct {
	mu   sync.Mutex
	last map[string]hlc.Timestamp
}

// fresh reports whether a message from replica on path, sent at sent, is
// newer than the last one on that path (catch-up replies, answers to this
// node's own requests, are not ordered) and records it.
func (o *order) fresh(path, replica string, sent hlc.Timestamp) bool {
	if path == pathCatchUp {
		return true
	}
	k := path + "\x00" + replica
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.last == nil {
		o.last = make(map[string]hlc.Timestamp)
	}
	last, ok := o.last[k]
	if ok && !last.Less(sent) {
		return false
	}
	if !ok && len(o.last) >= maxOrdered {
		clear(o.last) // members only reach here (messages are authenticated); start over
	}
	o.last[k] = sent
	return true
}

// replayed reports whether msg is a replay (see above), counting it.
func (g *Gossip) replayed(path string, msg *Message, nowMs int64) bool {
	if msg.Sent.Wall < nowMs-maxMessageAge.Milliseconds() || !g.order.fresh(path, msg.Replica, msg.Sent) {
		g.m.dropped.WithLabelValues(path, "replay").Inc()
		g.log.Debug("dropping a replayed or stale gossip message", "path", path, "from", msg.Replica, "sent", msg.Sent)
		return true
	}
	return false
}
