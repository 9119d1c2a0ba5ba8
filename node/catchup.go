package node

import (
	"context"
	"strings"
	"time"

	"tally/gossip"
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
	if n.startAt.Load() == 0 { // still replaying
		return true
	}
	waited := sinceStart(n)
	switch {
	case n.gossip.CaughtUp():
		if n.caughtUp.CompareAndSwap(false, true) {
			n.log.Info("caught up with the other replicas' ballots; taking votes", "after", waited.Round(time.Millisecond))
		}
	case waited >= n.cfg.CatchUpWait:
		if n.caughtUp.CompareAndSwap(false, true) {
			n.m.catchUpTimeouts.Inc()
			msg, attrs := notCaughtUp(catchUpViewOf(n))
			n.log.Warn(msg, append([]any{"waited", waited.Round(time.Millisecond)}, attrs...)...)
		}
	default:
		return true
	}
	return false
}

// catchUpView is what gossip tells of a node whose --catch-up-wait is
// over before it caught up.
type catchUpView struct {
	others  int      // live members besides this node
	joined  bool     // a --join seed answered once, or none was given (gossip.Joined)
	refused bool     // a peer could not read this node's gossip for its key (gossip.KeyRefused)
	synced  bool     // a member's full state merged
	unheard []string // replicas holding records it has heard nothing from
	seeds   string   // --join
}

func catchUpViewOf(n *Node) catchUpView {
	v := catchUpView{joined: n.gossip.Joined(), refused: gossip.KeyRefused(n.gossip), synced: n.gossip.Synced(),
		unheard: n.gossip.Unheard(), seeds: strings.Join(n.cfg.Join, ",")}
	for _, m := range n.gossip.Members() {
		if !m.Self {
			v.others++
		}
	}
	return v
}

// notCaughtUpMsg begins every line of a node that takes votes before it
// caught up; takesAnyway ends it, with what that risks.
const (
	notCaughtUpMsg = "not caught up with the other replicas' ballots"
	takesAnyway    = "(a retry of a key taken elsewhere may get a new vote id; certification names any replica it cannot read)"
)

// notCaughtUp is the warning, and its attributes but the wait, of a node
// that takes votes past --catch-up-wait without being caught up: why, as
// far as gossip tells. Alone, it says so (another --gossip-key refused,
// the seeds silent, or every member gone); joined, what it still lacks:
// replicas unheard, a member's full state, or ballots.
func notCaughtUp(v catchUpView) (string, []any) {
	switch {
	case v.others == 0 && v.refused:
		return notCaughtUpMsg + ": joined no cluster member, a node it tried to join refused this node's --gossip-key (see the gossip key error above); taking votes alone " + takesAnyway,
			[]any{"flag", "--gossip-key", "seeds", v.seeds}
	case v.others == 0 && !v.joined:
		return notCaughtUpMsg + ": joined no cluster member, no --join seed answered (down, unreachable, or not started yet); taking votes alone " + takesAnyway,
			[]any{"flag", "--join", "seeds", v.seeds}
	case v.others == 0:
		return notCaughtUpMsg + ": no other cluster member is alive; taking votes alone " + takesAnyway,
			[]any{"flag", "--catch-up-wait", "seeds", v.seeds}
	case len(v.unheard) > 0:
		return notCaughtUpMsg + "; taking votes anyway " + takesAnyway,
			[]any{"flag", "--catch-up-wait", "synced", v.synced, "unheard", v.unheard}
	case !v.synced:
		return notCaughtUpMsg + ": joined the cluster but merged no member's full state yet (memberlist push/pull), so it cannot tell which ballots it lacks; taking votes anyway " + takesAnyway,
			[]any{"flag", "--catch-up-wait", "members", v.others + 1}
	}
	return notCaughtUpMsg + ": heard from every replica but, at the last look, held fewer of their ballots than the cluster's record counts say exist; taking votes anyway " + takesAnyway,
		[]any{"flag", "--catch-up-wait", "members", v.others + 1}
}

// startingWhy says why a node that is not ready yet answers nothing.
func startingWhy(n *Node) string {
	if n.startAt.Load() == 0 {
		return "replaying the ledger"
	}
	if why := n.restore.reason(); why != "" {
		return why
	}
	return "back from an unclean stop, regaining the other replicas' state so that it never shows less than it showed before"
}

// sinceStart is how long ago n's start order was done (0 before).
func sinceStart(n *Node) time.Duration {
	at := n.startAt.Load()
	if at == 0 {
		return 0
	}
	return time.Since(time.Unix(0, at))
}

// After an unclean stop (the run mark, checkpoint.go) the tallies kept
// may lack what the node showed in its last moments: they are synced
// every talliesEvery, and what gossip brought since was on air and in no
// file. A node does not answer before it knows what it answered: it
// stays unready — the public reads and the live streams answer 503 with
// Retry-After like the rest of the API — until it holds the other
// replicas' state again (caught up, as for votes; an edge: a member's
// full state merged), whose own counts are at least what it showed of
// them. Past --catch-up-wait, with no replica answering, it answers from
// the tallies it kept, which may lack that last moment, and says so.

// readyOnceRegained turns the node ready once it holds the other
// replicas' state again, or the wait is over.
func readyOnceRegained(ctx context.Context, n *Node) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if done, caught := regained(n); done && n.restore.whole(ctx) {
			if caught {
				n.log.Info("back from an unclean stop holding the other replicas' state: answering", "after", sinceStart(n).Round(time.Millisecond))
			} else {
				n.log.Warn("back from an unclean stop without the other replicas' state: answering from the tallies kept, which may lack what gossip brought in the last moments before the stop",
					"waited", sinceStart(n).Round(time.Millisecond), "flag", "--catch-up-wait", "unheard", n.gossip.Unheard())
			}
			n.ready.Store(true)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// regained reports whether the node holds the other replicas' state (a
// full node caught up, an edge synced) or --catch-up-wait has passed
// (done), and whether it was the state (caught).
func regained(n *Node) (done, caught bool) {
	if n.edge == nil {
		if n.catchingUp() {
			return false, false
		}
		return true, n.gossip.CaughtUp()
	}
	if n.gossip.Synced() {
		return true, true
	}
	return sinceStart(n) >= n.cfg.CatchUpWait, false
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
// records this replica acknowledged and its ledger does not hold, which
// gossip showed only after the node turned ready (a backup put in place
// by hand, whose start heard no member in time): the node takes no new
// votes on them; its next start completes them from their copy
// (restore.go), which does that at once for a node still completing.
func (n *Node) warnLostRecords() {
	if n.restore.open.Load() {
		return // restoring.whole says what is missing, and fills it
	}
	for _, d := range n.state.Defs.Polls() {
		held, acked, err := n.state.OwnRecords(d.ID)
		if err != nil || acked <= held {
			continue
		}
		n.log.Warn("this replica acknowledged records of the poll that its ledger does not hold (restored from an older backup?): it takes no new votes on it; restart the node to have them completed from their copy before it turns ready (docs/operations.md, \"Backups and restore\")",
			"poll", d.ID, "replica", n.replica, "held", held, "acknowledged", acked, "lost_from_seq", held+1, "lost_to_seq", acked)
	}
}

// mayCertify reports whether this node may coordinate or certify a poll:
// it has merged a member's full state (or runs alone by design) and its
// catch-up gate is open, so the record counts it certifies against are the
// cluster's, not those of a node back from a restart that has heard from
// nobody yet. Past --catch-up-wait it certifies anyway: a replica it knows
// of and cannot read leaves the poll pending, named. A node restored from
// a backup certifies nothing until its own chains are whole again.
func (n *Node) mayCertify() bool {
	return n.gossip.Synced() && !n.catchingUp() && !n.restore.open.Load()
}
