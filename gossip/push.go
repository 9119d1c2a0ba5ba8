package gossip

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"tally/crdt"
	"tally/poll"
)

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
func (g *Gossip) pushSubject() string { return g.subject + ".push" }

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
	b, err := g.pushMessage(pollID, reg)
	if err != nil {
		return res, err
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return res, fmt.Errorf("gossip: push: %w", err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(g.pushSubject(), inbox, b); err != nil {
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
func (g *Gossip) pushMessage(pollID string, reg crdt.Register[poll.Definition]) ([]byte, error) {
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
func (g *Gossip) servePush(m *nats.Msg) {
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
