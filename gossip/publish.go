package gossip

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"tally/crdt"
	"tally/hlc"
	"tally/poll"
	"tally/state"
)

// refreshAfterClose is how long after close plus grace a poll is still
// refreshed on NATS (late counts, the close itself).
const refreshAfterClose = time.Minute

// publisher remembers what this node last published, so each delta holds
// only what changed since.
type publisher struct {
	published
	last   time.Time // last refresh (or heartbeat), process clock
	budget budgetPub // the token budget's (budget.go)
}

// published is, per poll, what of this node's own a delta carried.
type published struct {
	versions map[string]uint64        // poll → own tally version
	defs     map[string]hlc.Timestamp // poll → own definition write
	certs    map[string]hlc.Timestamp // poll → own certificate
	viewers  map[string]int64         // poll → own viewer count
	joiners  map[string]string        // poll → own newest joiners (joinersKey)
}

func newPublished() published {
	return published{versions: map[string]uint64{}, defs: map[string]hlc.Timestamp{}, certs: map[string]hlc.Timestamp{}, viewers: map[string]int64{}, joiners: map[string]string{}}
}

// add records what a delta that went out carried.
func (p published) add(sent published) {
	maps.Copy(p.versions, sent.versions)
	maps.Copy(p.defs, sent.defs)
	maps.Copy(p.certs, sent.certs)
	maps.Copy(p.viewers, sent.viewers)
	maps.Copy(p.joiners, sent.joiners)
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
	g.pub = publisher{published: newPublished()}
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
	nc := g.mesh.Conn()
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
	nowMs := g.cfg.Now().UnixMilli() // wall time: which polls are live
	mono := time.Now()               // process time: when the next refresh is due
	refresh := g.refreshNow.Swap(false) || mono.Sub(g.pub.last) >= g.cfg.HeartbeatEvery
	ballots := g.takeBallots()
	sent := newPublished()
	for _, d := range g.cfg.State.Defs.Polls() {
		if !g.gossiped(d, nowMs) {
			continue
		}
		live := refresh && (d.ClosesAt == 0 || nowMs < poll.AddMs(d.GraceEnd(), refreshAfterClose.Milliseconds()))
		if u, ok := g.pollUpdate(d.ID, live, refresh, ballots[d.ID], sent); ok {
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
	g.pub.add(sent)
	g.m.bytes.WithLabelValues(pathNATS, "out").Add(float64(len(b)))
	g.m.messages.WithLabelValues(pathNATS, "out").Inc()
	if len(msg.Polls) > 0 {
		g.m.published.Inc()
	}
	return len(msg.Polls) > 0
}

// takeBallots takes this replica's ballots for one delta: taken now, sent
// once (a delta lost on the way is fetched by the others' catch-up: the
// record counts say it exists). An edge holds none.
func (g *Gossip) takeBallots() map[string][]crdt.Ballot {
	if g.cfg.Role != RoleFull {
		return nil
	}
	ballots := g.cfg.State.TakeBallots(MaxBallots)
	if g.alone() {
		// Nobody to tell: a member that joins later fetches them by
		// catch-up. Encoding them anyway cost 2% of a lone node's CPU.
		return nil
	}
	return ballots
}

// pollUpdate is what one delta says of poll id: this node's own
// definition write, certificate, tally entries and viewers where they
// changed since the last delta (all of them for a live poll in a
// refresh), and its ballots. It records what it carries in sent and
// reports whether it carries anything.
func (g *Gossip) pollUpdate(id string, live, refresh bool, ballots []crdt.Ballot, sent published) (PollUpdate, bool) {
	u := PollUpdate{ID: id, Ballots: ballots}
	if reg, ok := g.cfg.State.Defs.PollRegister(id); ok && reg.TS.Replica == g.cfg.Replica && (live || reg.TS != g.pub.defs[id]) {
		u.Def, sent.defs[id] = &reg, reg.TS
	}
	if c, ok := g.cfg.State.Defs.Certificate(id); ok && c.By == g.cfg.Replica && (live || c.TS != g.pub.certs[id]) {
		u.Cert, sent.certs[id] = &c, c.TS
	}
	if g.cfg.Role == RoleFull {
		since := g.pub.versions[id]
		if live {
			since = 0
		}
		if delta, v, err := g.cfg.State.OwnDelta(id, since); err == nil {
			sent.versions[id] = v
			if !delta.Empty() {
				u.Tally = delta
			}
		}
	}
	// Viewers when they changed, and in every refresh while there are
	// any, so the others' reports of them stay fresh.
	if n, ok := g.cfg.State.Audience.Own(id); ok && (n != g.pub.viewers[id] || refresh && n > 0) {
		u.Viewers, sent.viewers[id] = &n, n
	}
	// The newest joiners of a quiz's lobby likewise: when they changed, and
	// in every refresh while there are any.
	if js, ok := g.cfg.State.Audience.OwnJoiners(id); ok {
		if k := joinersKey(js); k != g.pub.joiners[id] || refresh && len(js) > 0 {
			if js == nil {
				js = []state.Joiner{}
			}
			u.Joiners, sent.joiners[id] = js, k
		}
	}
	return u, u.Def != nil || u.Tally != nil || u.Cert != nil || len(u.Ballots) > 0 || u.Viewers != nil || u.Joiners != nil
}

// joinersKey is what a report of joiners says, to tell a change.
func joinersKey(js []state.Joiner) string {
	var b strings.Builder
	for _, j := range js {
		fmt.Fprintf(&b, "%s\x00%d\x00%d\x00", j.Name, j.AtMs, j.Seq)
	}
	return b.String()
}

// A close "now" must not wait for the next delta, nor be answered while
// another region still answers "accepted" under the old close: the host
// says "voting closes now!" and the flood is at its peak. So the node that
// writes a definition the host changed pushes it at once to every full
// node, on a subject of its own, as a request; each applies it as it
// applies any delta, waits for its votes in flight (Config.Settle), and
// confirms. The writer answers the host once every live full node has
// confirmed, or the wait is over, and says which did not (a region cut
// off goes on counting until it hears of the close: its votes count, as
// its node decided; docs/certification.md).

// pathPush is the path of pushed definitions, in metrics and in the
// replay order (apart from the NATS deltas': a push may overtake one).
const pathPush = "push"

// ErrNoMesh reports a push with no NATS connection to send it on.
var ErrNoMesh = errors.New("gossip: not connected to the NATS mesh")

// Push is how a pushed definition fared: the full nodes that confirmed
// they apply it (and have answered every vote read under the one before),
// and the live full members that did not within the wait.
type Push struct {
	Confirmed   []string `json:"confirmed"`             // replica ids
	Unconfirmed []string `json:"unconfirmed,omitempty"` // replica ids
	Took        time.Duration
}

// pushSubject is where pushed definitions go.
func pushSubject(g *Gossip) string { return g.subject + ".push" }

// PushDefinition sends this node's current definition of the poll to every
// full node at once and waits, until ctx is done, for each live full
// member but this one to confirm it. A single node confirms at once.
func (g *Gossip) PushDefinition(ctx context.Context, pollID string) (Push, error) {
	start := time.Now()
	reg, ok := g.cfg.State.Defs.PollRegister(pollID)
	if !ok {
		return Push{}, fmt.Errorf("gossip: push: no poll %q", pollID)
	}
	want := map[string]bool{}
	for _, m := range g.Members() {
		if m.Role == RoleFull && !m.Self && m.Replica != "" {
			want[m.Replica] = true
		}
	}
	res := Push{Confirmed: []string{}}
	if len(want) == 0 {
		res.Took = time.Since(start)
		return res, nil
	}
	nc := g.mesh.Conn()
	if nc == nil || !nc.IsConnected() {
		res.Unconfirmed = slices.Sorted(maps.Keys(want))
		return res, ErrNoMesh
	}
	b, err := pushMessage(g, pollID, reg)
	if err != nil {
		return res, err
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return res, fmt.Errorf("gossip: push: %w", err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(pushSubject(g), inbox, b); err != nil {
		return res, fmt.Errorf("gossip: push: %w", err)
	}
	g.m.bytes.WithLabelValues(pathPush, "out").Add(float64(len(b)))
	g.m.messages.WithLabelValues(pathPush, "out").Inc()
	for len(want) > 0 {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break // the wait is over: the rest did not confirm
		}
		if rep := string(m.Data); want[rep] {
			delete(want, rep)
			res.Confirmed = append(res.Confirmed, rep)
		}
	}
	slices.Sort(res.Confirmed)
	res.Unconfirmed = slices.Sorted(maps.Keys(want))
	res.Took = time.Since(start)
	return res, nil
}

// pushMessage is a delta holding only the poll's definition, sealed.
func pushMessage(g *Gossip, pollID string, reg crdt.Register[poll.Definition]) ([]byte, error) {
	ts, err := g.cfg.Clock.Now()
	if err != nil {
		return nil, fmt.Errorf("gossip: push: %w", err)
	}
	msg := &Message{Kind: KindDelta, Replica: g.cfg.Replica, Region: g.cfg.Region, Sent: ts,
		Polls: []PollUpdate{{ID: pollID, Def: &reg}}}
	b, err := Encode(msg)
	if err != nil {
		return nil, fmt.Errorf("gossip: push: %w", err)
	}
	return g.keys.seal(b), nil
}

// servePush applies a pushed definition, waits for this node's votes in
// flight, and confirms with this replica's id. A message that does not
// open, decode or apply is not confirmed (the writer names this node).
func servePush(g *Gossip, m *nats.Msg) {
	if g.closed.Load() || m.Reply == "" {
		return
	}
	g.m.bytes.WithLabelValues(pathPush, "in").Add(float64(len(m.Data)))
	g.m.messages.WithLabelValues(pathPush, "in").Inc()
	body, err := g.keys.open(m.Data)
	if err != nil {
		g.m.dropped.WithLabelValues(pathPush, "unauthenticated").Inc()
		return
	}
	msg, err := Decode(body)
	if err != nil || msg.Kind != KindDelta || len(msg.Polls) != 1 || msg.Polls[0].Def == nil {
		g.m.dropped.WithLabelValues(pathPush, "malformed").Inc()
		return
	}
	g.apply(pathPush, msg)
	if def, ok := g.cfg.State.Defs.Poll(msg.Polls[0].ID); !ok || def.ClosesAt > msg.Polls[0].Def.Value.ClosesAt {
		return // not applied (skewed, refused): this node does not close then
	}
	if g.cfg.Settle != nil {
		g.cfg.Settle()
	}
	if err := m.Respond([]byte(g.cfg.Replica)); err != nil {
		g.log.Warn("cannot confirm a pushed definition", "poll", msg.Polls[0].ID, "from", msg.Replica, "err", err)
	}
}
