package node

import (
	"context"
	"time"
)

// After a start, a node knows its own votes (the ledger) but not yet the
// other replicas' ballots: a retry of a key another region took would look
// new, and be answered with a second vote id (DESIGN invariant 2). So it
// holds back new votes — /readyz answers 503 and the vote path 503 with
// Retry-After: 1, while retries of keys it knows are answered — until
// gossip says it has merged a peer's full state and holds every ballot the
// cluster's record counts say exists (gossip.CaughtUp), or until
// --catch-up-wait has passed. Past the wait (a region down, whose ballots
// nobody else serves) it takes votes anyway and says so in the log and in
// tally_catch_up_timeouts_total: a retry of a key taken at the missing
// region may then get a new vote id; certification still counts the key
// once.

// catchingUp reports whether the gate is still closed, opening it for good
// once caught up or once the wait is over.
func (n *Node) catchingUp() bool {
	if n.caughtUp.Load() || n.edge != nil { // an edge holds no ballots: the full nodes it relays to hold back
		return false
	}
	if !n.ready.Load() {
		return true
	}
	waited := time.Since(time.Unix(0, n.readyAt.Load()))
	switch {
	case n.gossip.CaughtUp():
		if n.caughtUp.CompareAndSwap(false, true) {
			n.log.Info("caught up with the other replicas' ballots; taking votes", "after", waited.Round(time.Millisecond))
		}
	case waited >= n.cfg.CatchUpWait:
		if n.caughtUp.CompareAndSwap(false, true) {
			n.m.catchUpTimeouts.Inc()
			n.log.Warn("not caught up with the other replicas' ballots; taking votes anyway (a retry of a key taken elsewhere may get a new vote id; certification names any replica it cannot read)",
				"waited", waited.Round(time.Millisecond), "flag", "--catch-up-wait", "synced", n.gossip.Synced(), "unheard", n.gossip.Unheard())
		}
	default:
		return true
	}
	return false
}

// watchCatchUp opens the gate as soon as it may, whether or not anyone
// asks (/readyz, a vote, a scrape of tally_ready), so the log's time and
// the metrics tell the truth on an idle node.
func (n *Node) watchCatchUp(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for n.catchingUp() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	n.warnLostRecords()
}

// warnLostRecords tells the operator, once caught up, of every poll whose
// records this replica acknowledged and no longer holds (a restore from an
// older backup): the node takes no new votes on them, and their
// certification waits for a decision.
func (n *Node) warnLostRecords() {
	for _, d := range n.state.Defs.Polls() {
		held, acked, err := n.state.OwnRecords(d.ID)
		if err != nil || acked <= held {
			continue
		}
		n.log.Warn("this replica acknowledged records of the poll that its ledger no longer holds (restored from an older backup?): it takes no new votes on it, and the poll certifies once you decide (tally poll certify --accept-lost REPLICA --reason …; docs/operations.md, \"Backups and restore\")",
			"poll", d.ID, "replica", n.replica, "held", held, "acknowledged", acked, "lost_from_seq", held+1, "lost_to_seq", acked)
	}
}

// mayCertify reports whether this node may coordinate or certify a poll:
// it has merged a member's full state (or runs alone by design) and its
// catch-up gate is open, so the record counts it certifies against are the
// cluster's, not those of a node back from a restart that has heard from
// nobody yet. Past --catch-up-wait it certifies anyway: a replica it knows
// of and cannot read leaves the poll pending, named.
func (n *Node) mayCertify() bool { return n.gossip.Synced() && !n.catchingUp() }
