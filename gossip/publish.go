package gossip

import (
	"context"
	"time"

	"tally/crdt"
	"tally/hlc"
	"tally/poll"
)

// refreshAfterClose is how long after close plus grace a poll is still
// refreshed on NATS (late counts, the close itself).
const refreshAfterClose = time.Minute

// publisher remembers what this node last published, so each delta holds
// only what changed since.
type publisher struct {
	versions map[string]uint64        // poll → own tally version published
	defs     map[string]hlc.Timestamp // poll → own definition write published
	certs    map[string]hlc.Timestamp // poll → own certificate published
	viewers  map[string]int64         // poll → own viewer count published
	last     time.Time                // last refresh (or heartbeat), process clock
	budget   budgetPub                // the token budget's (budget.go)
}

// publishLoop publishes this replica's changes every PublishEvery, when
// there are any. Every HeartbeatEvery it publishes a refresh instead: all
// of its own entries and definitions of the polls still open (or in their
// grace window), so a node that missed a delta (it was reconnecting, a
// gateway was not up yet) catches up within a second without waiting for
// push/pull; with no such poll the refresh is a bare heartbeat. It never
// blocks the vote path: votes only touch the state.
func (g *Gossip) publishLoop(ctx context.Context) {
	defer g.wg.Done()
	g.pub = publisher{versions: map[string]uint64{}, defs: map[string]hlc.Timestamp{}, certs: map[string]hlc.Timestamp{}, viewers: map[string]int64{}}
	t := time.NewTicker(g.cfg.PublishEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.publishOnce()
		}
	}
}

// publishOnce sends one delta or heartbeat if due, and reports whether it
// sent a delta.
func (g *Gossip) publishOnce() bool {
	g.natsMu.Lock()
	nc := g.nc
	g.natsMu.Unlock()
	if nc == nil || !nc.IsConnected() {
		return false // nothing is lost: the next delta covers everything since the last one sent
	}
	if g.cfg.Role == RoleFull {
		g.publishBudget(nc, time.Now())
	}
	ts, err := g.cfg.Clock.Now()
	if err != nil {
		g.log.Error("clock", "err", err)
		return false
	}
	msg := &Message{Kind: KindDelta, Replica: g.cfg.Replica, Region: g.cfg.Region, Sent: ts}
	versions := map[string]uint64{}
	defs := map[string]hlc.Timestamp{}
	certs := map[string]hlc.Timestamp{}
	viewers := map[string]int64{}
	nowMs := g.cfg.Now().UnixMilli() // wall time: which polls are live
	mono := time.Now()               // process time: when the next refresh is due
	refresh := g.refreshNow.Swap(false) || mono.Sub(g.pub.last) >= g.cfg.HeartbeatEvery
	var ballots map[string][]crdt.Ballot
	if g.cfg.Role == RoleFull {
		// Taken now, sent once: a delta lost on the way is fetched by the
		// others' catch-up (the record counts say it exists).
		ballots = g.cfg.State.TakeBallots(MaxBallots)
		if g.alone() {
			// Nobody to tell: a member that joins later fetches them by
			// catch-up. Encoding them anyway cost 2% of a lone node's CPU.
			ballots = nil
		}
	}
	for _, d := range g.cfg.State.Polls() {
		if !g.gossiped(d, nowMs) {
			continue
		}
		live := refresh && (d.ClosesAt == 0 || nowMs < poll.AddMs(d.GraceEnd(), refreshAfterClose.Milliseconds()))
		var u PollUpdate
		if reg, ok := g.cfg.State.PollRegister(d.ID); ok && reg.TS.Replica == g.cfg.Replica && (live || reg.TS != g.pub.defs[d.ID]) {
			u.Def, defs[d.ID] = &reg, reg.TS
		}
		if c, ok := g.cfg.State.Certificate(d.ID); ok && c.By == g.cfg.Replica && (live || c.TS != g.pub.certs[d.ID]) {
			u.Cert, certs[d.ID] = &c, c.TS
		}
		if g.cfg.Role == RoleFull {
			since := g.pub.versions[d.ID]
			if live {
				since = 0
			}
			delta, v, err := g.cfg.State.OwnDelta(d.ID, since)
			if err == nil {
				versions[d.ID] = v
				if !delta.Empty() {
					u.Tally = delta
				}
			}
		}
		u.Ballots = ballots[d.ID]
		// Viewers when they changed, and in every refresh while there are
		// any, so the others' reports of them stay fresh.
		if n, ok := g.cfg.State.OwnViewers(d.ID); ok && (n != g.pub.viewers[d.ID] || refresh && n > 0) {
			u.Viewers, viewers[d.ID] = &n, n
		}
		if u.Def != nil || u.Tally != nil || u.Cert != nil || len(u.Ballots) > 0 || u.Viewers != nil {
			u.ID = d.ID
			msg.Polls = append(msg.Polls, u)
		}
	}
	if len(msg.Polls) == 0 && !refresh {
		return false
	}
	b, err := Encode(msg)
	if err != nil {
		g.log.Error("encode delta", "err", err)
		return false
	}
	b = g.keys.seal(b)
	if err := nc.Publish(g.subject, b); err != nil {
		g.log.Warn("nats publish", "err", err)
		return false
	}
	if refresh {
		g.pub.last = mono
	}
	for id, v := range versions {
		g.pub.versions[id] = v
	}
	for id, ts := range defs {
		g.pub.defs[id] = ts
	}
	for id, ts := range certs {
		g.pub.certs[id] = ts
	}
	for id, n := range viewers {
		g.pub.viewers[id] = n
	}
	g.m.bytes.WithLabelValues(pathNATS, "out").Add(float64(len(b)))
	g.m.messages.WithLabelValues(pathNATS, "out").Inc()
	if len(msg.Polls) > 0 {
		g.m.published.Inc()
	}
	return len(msg.Polls) > 0
}
