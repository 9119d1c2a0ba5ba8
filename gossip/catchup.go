package gossip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"tally/crdt"
	"tally/poll"
)

// pathCatchUp labels ballots a node asked for because it lacked them.
const pathCatchUp = "catchup"

// catchUpBatch is the most ballots one catch-up reply carries (about
// 1.1 MB before deflate).
const catchUpBatch = 50_000

// natsCatchUpTimeout bounds a catch-up request over NATS before the same
// request goes over memberlist instead (a node just started, whose NATS
// gateways are not up yet, would otherwise wait the whole request out).
const natsCatchUpTimeout = 1500 * time.Millisecond

// startingLookEvery is how often a node not yet caught up (just started)
// looks.
const startingLookEvery = 200 * time.Millisecond

// catchUpEvery is how often a node compares the ballots it holds with the
// record counts the cluster reports.
const catchUpEvery = time.Second

// ballotRequest asks a replica's node for that replica's ballots of a poll
// after Seq After.
// catchUp fetches the other replicas' ballots a node missed while it was
// away, and answers theirs: over NATS, or memberlist when NATS is down.
type catchUp struct {
	g         *Gossip
	wait      waiters       // memberlist requests awaiting answers
	answering chan struct{} // bounds memberlist answers in flight
}

type ballotRequest struct {
	Poll  string `json:"poll"`
	After uint64 `json:"after"`
	// Over memberlist (NATS down): who asks, and the id its answer carries.
	From string `json:"from,omitempty"`
	ID   string `json:"id,omitempty"`
}

// CaughtUp reports whether, at the last look (every second), this node
// had merged a peer's full state, heard from every replica known to hold
// records of a poll not yet certified (Unheard), and held every ballot the
// cluster's record counts say exists, for every poll still gossiped:
// whether it can tell a retry of a key taken elsewhere from a new vote,
// and certify. A node that runs alone by design is caught up at once.
func (g *Gossip) CaughtUp() bool { return g.known.alonePlanned() || g.caughtUp.Load() }

// subject is where replica's node answers for its ballots.
func (c *catchUp) subject(replica string) string {
	g := c.g
	return "tally." + g.cfg.Cluster + ".ballots." + replica
}

// merge applies ballots received on path.
func (c *catchUp) merge(path, pollID string, bs []crdt.Ballot) (int, error) {
	g := c.g
	added, left, err := g.cfg.State.MergeBallots(pollID, bs)
	if left > 0 {
		g.m.dropped.WithLabelValues(path, "unknown_option").Add(float64(left))
	}
	return added, err
}

// reasonOf names a merge error for tally_gossip_dropped_total.
func reasonOf(err error) string {
	if errors.Is(err, poll.ErrNotFound) {
		return "unknown_poll" // the definition comes next; catch-up fetches the ballots then
	}
	return "rejected"
}

// serve answers other nodes' catch-up requests for this replica's
// ballots over NATS.
func (c *catchUp) serve(m *nats.Msg) {
	g := c.g
	if _, b, ok := g.catchup.answerFor(m.Data, g.cfg.Replica); ok {
		if err := m.Respond(b); err == nil {
			g.m.bytes.WithLabelValues(pathCatchUp, "out").Add(float64(len(b)))
		}
	}
}

// answerFor opens a sealed request and builds the sealed reply: replica's
// ballots of the poll after the Seq asked for, from memory (this node's
// own, or a gone replica's it holds: steward.go, which answers only when
// it holds some).
func (c *catchUp) answerFor(sealed []byte, replica string) (ballotRequest, []byte, bool) {
	g := c.g
	var req ballotRequest
	if g.refuseKeyless(pathCatchUp, len(sealed)) {
		return req, nil, false
	}
	body, err := g.keys.open(sealed)
	if err != nil {
		g.m.dropped.WithLabelValues(pathCatchUp, "unauthenticated").Inc()
		return req, nil, false
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Poll == "" {
		g.m.dropped.WithLabelValues(pathCatchUp, "malformed").Inc()
		return req, nil, false
	}
	bs, err := g.cfg.State.BallotsSince(req.Poll, replica, req.After, catchUpBatch)
	if err != nil {
		bs = nil // an unknown poll: an empty answer
	}
	if len(bs) == 0 && replica != g.cfg.Replica {
		return req, nil, false // another holder may have them
	}
	ts, err := g.cfg.Clock.Now()
	if err != nil {
		return req, nil, false
	}
	b, err := Encode(&Message{Kind: KindDelta, Replica: g.cfg.Replica, Region: g.cfg.Region, Sent: ts,
		Polls: []PollUpdate{{ID: req.Poll, Ballots: bs}}})
	if err != nil {
		g.log.Error("encode ballots", "err", err)
		return req, nil, false
	}
	return req, g.keys.seal(b), true
}

// loop asks, every catchUpEvery, for the ballots this node lacks:
// those of a replica whose record count (gossiped with its counters) is
// above the ballots held of it, when a second has brought none of them
// (a missed delta, a partition, a restart). It stops with ctx.
func (c *catchUp) loop(ctx context.Context) {
	g := c.g
	defer g.wg.Done()
	t := time.NewTimer(startingLookEvery)
	defer t.Stop()
	last := map[[2]string]uint64{} // (poll, replica) → ballots held at the last look
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.catchup.look(ctx, last)
		}
		if g.caughtUp.Load() {
			t.Reset(catchUpEvery)
		} else {
			t.Reset(startingLookEvery) // a node that just started looks more often
		}
	}
}

func (c *catchUp) look(ctx context.Context, last map[[2]string]uint64) {
	g := c.g
	nc := g.mesh.Conn()
	if nc != nil && !nc.IsConnected() {
		nc = nil // NATS is down: ask over memberlist instead
	}
	now := g.cfg.Now().UnixMilli()
	seen := map[[2]string]bool{}
	behind := false
	// A node not yet caught up (just started) fetches at once: nothing in
	// flight will bring it ballots older than its start.
	starting := !g.caughtUp.Load()
	live, _, trusted := liveFull(g)
	defer func() { g.caughtUp.Store(!behind && g.Synced() && len(g.Unheard()) == 0) }()
	for d, c := range gossipedCounts(g, now) {
		have := c.have
		for replica, records := range c.records {
			key := [2]string{d.ID, replica}
			seen[key] = true
			h := have[replica]
			if replica == g.cfg.Replica || h >= records {
				continue
			}
			prev, looked := last[key]
			last[key] = h
			if !starting && (!looked || prev != h) {
				behind = true
				continue // still arriving: give the fast path a second
			}
			if err := g.catchup.fetch(ctx, nc, d.ID, replica, h, records); err != nil {
				// A gone replica's ballots come from whoever holds them
				// (steward.go), or never: it holds nobody back.
				behind = behind || !trusted || live[replica]
				g.m.catchUp.WithLabelValues("failed").Inc()
				g.log.Debug("ballot catch-up", "poll", d.ID, "replica", replica, "err", err)
			}
		}
	}
	for key := range last {
		if !seen[key] {
			delete(last, key)
		}
	}
}

// fetch asks replica's node for its ballots of the poll after Seq
// from, batch after batch, until want are held or a reply brings nothing:
// over NATS, or over memberlist when nc is nil.
func (c *catchUp) fetch(ctx context.Context, nc *nats.Conn, pollID, replica string, from, want uint64) error {
	g := c.g
	for from < want {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var reply []byte
		var err error
		if nc != nil {
			req, _ := json.Marshal(ballotRequest{Poll: pollID, After: from})
			nctx, ncancel := context.WithTimeout(rctx, natsCatchUpTimeout)
			var m *nats.Msg
			if m, err = nc.RequestWithContext(nctx, g.catchup.subject(replica), g.keys.seal(req)); err == nil {
				reply = m.Data
			}
			ncancel()
		}
		if nc == nil || err != nil {
			// NATS down, or not linked to the replica's region yet (a node
			// that just started, before its gateways are up): memberlist.
			reply, err = g.catchup.askMember(rctx, replica, ballotRequest{Poll: pollID, After: from})
		}
		cancel()
		if err != nil {
			return err
		}
		g.receive(pathCatchUp, reply)
		h, err := g.cfg.State.BallotsHave(pollID)
		if err != nil {
			return err
		}
		if h[replica] <= from {
			return fmt.Errorf("no progress after Seq %d (%d records reported)", from, want)
		}
		g.m.catchUp.WithLabelValues("fetched").Inc()
		from = h[replica]
	}
	return nil
}
