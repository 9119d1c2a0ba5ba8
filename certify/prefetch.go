package certify

import (
	"context"
	"errors"
	"time"

	"tally/hlc"
	"tally/state"
)

// prefetch keeps, while polls run, this node's copies of every replica's
// chain of them up to the record counts gossip reports, so that at close
// plus grace only the last records remain to be read (Certify tops the
// copies up and reconciles them). Every full node copies, since any may
// coordinate or take over. One top-up at a time, each from the last seq
// copied, and no more records held than cfg.Prefetch: past it the rest is
// read at close, as without a prefetch.
func (c *Certifier) prefetch(ctx context.Context) {
	if !c.cfg.Full || c.cfg.Prefetch <= 0 {
		return
	}
	t := time.NewTicker(c.cfg.PrefetchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.prefetchOnce(ctx)
	}
}

// prefetchOnce tops up every copy that is behind its replica's gossiped
// record count, for the polls open or in their grace window, and forgets
// the copies of polls certified or gone.
func (c *Certifier) prefetchOnce(ctx context.Context) {
	peers := map[string]Peer{}
	for _, p := range c.cfg.Peers() {
		if p.Full {
			peers[p.Replica] = p
		}
	}
	now := c.cfg.Now().UnixMilli()
	keep := map[string]bool{}
	for _, d := range c.cfg.State.Defs.Polls() {
		if cert, ok := c.cfg.State.Defs.Certificate(d.ID); d.ClosesAt == 0 || ok && cert.Status == state.Reconciled {
			continue
		}
		keep[d.ID] = true
		if now >= d.GraceEnd() {
			continue // certification's attempts read the rest themselves
		}
		tally, err := c.cfg.State.Tally(d.ID)
		if err != nil {
			continue
		}
		for replica, n := range tally.RecordCounts() {
			if ctx.Err() != nil {
				return
			}
			p, live := peers[replica]
			if n <= c.copies.count(d.ID, replica) || !live && replica != c.cfg.Replica {
				continue
			}
			if c.copies.size() >= c.copies.max {
				if !c.budgetLogged.Swap(true) {
					c.log.Warn("certification prefetch budget reached: the rest of the running polls' records are read at close", "records", c.copies.size())
				}
				return
			}
			cc := c.copies.get(d.ID, replica)
			if !cc.mu.TryLock() {
				continue // a certification attempt is reading it
			}
			_, err := c.topUp(ctx, cc, p, true, hlc.Timestamp{})
			c.copies.feed(cc, false)
			cc.mu.Unlock()
			if err != nil && !errors.Is(err, errBudget) && ctx.Err() == nil {
				c.prefetchErrors.Inc()
				c.log.Debug("certification prefetch", "poll", d.ID, "replica", replica, "err", err)
			}
		}
	}
	for _, poll := range c.copies.pollIDs() {
		if !keep[poll] {
			c.copies.forget(poll)
		}
	}
}
