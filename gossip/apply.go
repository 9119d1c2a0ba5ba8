package gossip

import (
	"errors"
	"slices"
	"sync"
	"time"

	"tally/crdt"
	"tally/hlc"
	"tally/poll"
	"tally/state"
)

// apply merges a received message into the state. It reports whether the
// state changed.
func (g *Gossip) apply(path string, msg *Message) bool {
	if msg.Replica == g.cfg.Replica {
		return false // our own message back (NATS echoes nothing, but a relay might)
	}
	if g.replayed(path, msg, g.cfg.Now().UnixMilli()) {
		return false
	}
	if err := g.cfg.Clock.Update(msg.Sent); err != nil {
		g.m.dropped.WithLabelValues(path, "skew").Inc()
		g.log.Warn("dropping gossip from a clock too far ahead", "from", msg.Replica, "err", err)
		return false
	}
	if msg.Kind == KindFull {
		defer g.synced.Store(true) // a full state merged, not one dropped for skew
	}
	changed := false
	// Freshness and viewer reports go by the sender's time (replay.go),
	// never later than this node's now.
	sentAt := min(msg.Sent.Wall, g.cfg.Now().UnixMilli())
	stampLimit := g.cfg.Now().UnixMilli() + maxStampAhead.Milliseconds()
	for _, p := range msg.Polls {
		if applyPoll(g, path, msg.Replica, p, sentAt, stampLimit) {
			changed = true
		}
	}
	now := g.cfg.Now().UnixMilli()
	if last, ok := g.cfg.State.Replicas.HeardAt(msg.Replica); ok && now-last > 2*g.cfg.HeartbeatEvery.Milliseconds() {
		// Silent for a while (a partition, a restart): it missed our
		// deltas too, so refresh at the next tick instead of within a second.
		g.refreshNow.Store(true)
	}
	g.cfg.State.Replicas.Heard(msg.Replica, msg.Region, sentAt)
	g.known.heardFrom(msg.Replica)
	if changed {
		g.m.merges.WithLabelValues(path).Inc()
	}
	return changed
}

// applyPoll merges one poll's update from replica from into g's state:
// its definition, certificate (signed by its certifier, stamped no later
// than stampLimit), ballots, viewers and tally. It reports whether the
// state changed.
func applyPoll(g *Gossip, path, from string, p PollUpdate, sentAt, stampLimit int64) bool {
	changed := false
	if p.Cert != nil && p.Cert.TS.Wall > stampLimit {
		g.m.dropped.WithLabelValues(path, "future_stamp").Inc()
		p.Cert = nil
	}
	if p.Cert != nil {
		// Signed by the replica that certified, with the key it
		// announced; anything else is dropped, whoever relayed it.
		if pub, ok := g.cfg.State.Defs.PublicKey(p.Cert.By); !ok || !p.Cert.VerifySignature(pub) {
			g.m.dropped.WithLabelValues(path, "bad_signature").Inc()
			if !ok && g.cfg.UnknownKey != nil {
				g.cfg.UnknownKey(*p.Cert) // its node may learn the key from the others
			} else {
				g.log.Warn("dropping a certificate whose signature does not verify", "poll", p.ID, "by", p.Cert.By, "from", from, "key_known", ok)
			}
			p.Cert = nil
		}
	}
	if p.Def != nil && p.Def.TS.Wall > stampLimit {
		// Even from a member: a definition stamped far ahead would win
		// every later write (an admin's close) until that time.
		g.m.dropped.WithLabelValues(path, "future_stamp").Inc()
		g.log.Warn("dropping a gossiped definition stamped in the future", "poll", p.ID, "from", from, "stamp", p.Def.TS)
		p.Def = nil
	}
	if p.Def != nil {
		won, err := g.cfg.State.Defs.MergePoll(*p.Def)
		if err != nil {
			g.m.dropped.WithLabelValues(path, "rejected").Inc()
			g.log.Warn("cannot apply a gossiped definition", "poll", p.ID, "from", from, "err", err)
			return changed
		}
		changed = changed || won
	}
	if p.Cert != nil && !g.known.checkCertificate(path, from, p.Cert) {
		p.Cert = nil
	}
	if p.Cert != nil {
		won, err := g.cfg.State.Defs.PutCertificate(*p.Cert)
		if err != nil {
			g.m.dropped.WithLabelValues(path, "rejected").Inc()
			g.log.Warn("cannot apply a gossiped certificate", "poll", p.ID, "from", from, "err", err)
		}
		changed = changed || won
	}
	if len(p.Ballots) > 0 && g.cfg.Role == RoleFull { // an edge keeps no voter state: it counts nothing itself
		if n, err := g.catchup.merge(path, p.ID, p.Ballots); err != nil {
			g.m.dropped.WithLabelValues(path, reasonOf(err)).Inc()
		} else if n > 0 {
			g.m.ballots.WithLabelValues(path).Add(float64(n))
		}
	}
	if p.Viewers != nil {
		g.cfg.State.Audience.Merge(p.ID, from, *p.Viewers, sentAt)
	}
	if p.Joiners != nil {
		g.cfg.State.Audience.MergeJoiners(p.ID, from, p.Joiners, sentAt)
	}
	if p.Tally != nil {
		if def, ok := g.cfg.State.Defs.Poll(p.ID); ok && hasUnknownOption(def, p.Tally) {
			// Merge keeps the poll's own options only; say so.
			g.m.dropped.WithLabelValues(path, "unknown_option").Inc()
		}
		c, err := g.cfg.State.Merge(p.ID, p.Tally)
		if errors.Is(err, state.ErrTooManyReplicas) {
			g.m.dropped.WithLabelValues(path, "too_many_replicas").Inc()
			g.log.Warn("dropping a gossiped tally", "poll", p.ID, "from", from, "err", err)
			return changed
		}
		if err != nil {
			// The definition has not arrived yet; anti-entropy brings both.
			g.m.dropped.WithLabelValues(path, "unknown_poll").Inc()
			return changed
		}
		changed = changed || c
	}
	return changed
}

// hasUnknownOption reports whether t counts an option def does not have.
func hasUnknownOption(def poll.Definition, t *crdt.Tally) bool {
	for _, o := range t.Options() {
		if !slices.ContainsFunc(def.Options, func(d poll.Option) bool { return d.ID == o }) {
			return true
		}
	}
	return false
}

// receive decodes and applies one message from path.
func (g *Gossip) receive(path string, b []byte) {
	if g.closed.Load() {
		return // closing: memberlist may still hand over a late exchange
	}
	g.m.bytes.WithLabelValues(path, "in").Add(float64(len(b)))
	g.m.messages.WithLabelValues(path, "in").Inc()
	if g.refuseKeyless(path, len(b)) {
		return
	}
	body, err := g.keys.open(b)
	if err != nil {
		g.m.dropped.WithLabelValues(path, "unauthenticated").Inc()
		g.log.Warn("dropping a gossip message not sealed with the cluster key", "path", path, "bytes", len(b))
		return
	}
	msg, err := Decode(body)
	if err != nil {
		g.m.dropped.WithLabelValues(path, "malformed").Inc()
		g.log.Warn("dropping a malformed gossip message", "path", path, "bytes", len(b), "err", err)
		return
	}
	g.apply(path, msg)
}

// gossiped reports whether a poll's state is still worth spreading: it has
// not been closed for longer than grace plus the retention period.
func (g *Gossip) gossiped(d poll.Definition, nowMs int64) bool {
	return d.ClosesAt == 0 || nowMs < poll.AddMs(d.GraceEnd(), g.cfg.Retention.Milliseconds())
}

// fullState builds the message push/pull exchanges: every gossiped poll's
// definition and tally.
func (g *Gossip) fullState() (*Message, error) {
	ts, err := g.cfg.Clock.Now()
	if err != nil {
		return nil, err
	}
	msg := &Message{Kind: KindFull, Replica: g.cfg.Replica, Region: g.cfg.Region, Sent: ts}
	now := g.cfg.Now().UnixMilli()
	for _, d := range g.cfg.State.Defs.Polls() {
		if !g.gossiped(d, now) {
			continue
		}
		reg, ok := g.cfg.State.Defs.PollRegister(d.ID)
		t, err := g.cfg.State.Tally(d.ID)
		if !ok || err != nil {
			continue
		}
		u := PollUpdate{ID: d.ID, Def: &reg, Tally: t}
		if c, ok := g.cfg.State.Defs.Certificate(d.ID); ok {
			u.Cert = &c
		}
		if n, ok := g.cfg.State.Audience.Own(d.ID); ok {
			u.Viewers = &n
		}
		if js, ok := g.cfg.State.Audience.OwnJoiners(d.ID); ok && len(js) > 0 {
			u.Joiners = js
		}
		msg.Polls = append(msg.Polls, u)
	}
	return msg, nil
}

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
