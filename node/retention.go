package node

import (
	"context"
	"runtime/debug"
	"time"

	"tally/poll"
	"tally/state"
)

// forgetLoop drops from memory, every cfg.ForgetEvery, the polls that are
// certified and past their grace window plus --retention (when the
// cluster stops gossiping them too). Their records and certificate stay
// on disk; a tombstone keeps them from coming back.
func (n *Node) forgetLoop(ctx context.Context) {
	t := time.NewTicker(n.cfg.ForgetEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			func() {
				defer func() {
					if v := recover(); v != nil {
						n.log.Error("forgetting polls past retention panicked; will retry", "panic", v, "stack", string(debug.Stack()))
					}
				}()
				n.forgetExpired()
			}()
		}
	}
}

// forgetExpired forgets every poll due, and reports how many.
func (n *Node) forgetExpired() int {
	now := n.cfg.Now().UnixMilli()
	forgotten := 0
	for _, d := range n.state.Defs.Polls() {
		cert, ok := n.state.Defs.Certificate(d.ID)
		if !ok || cert.Status != state.Reconciled || now < poll.AddMs(d.GraceEnd(), n.cfg.Retention.Milliseconds()) {
			continue // a poll still pending stays: an operator must see it
		}
		if err := n.state.Defs.Forget(d.ID, now); err != nil {
			n.log.Error("cannot forget a poll past retention; will retry", "poll", d.ID, "err", err)
			continue
		}
		n.m.pollsForgotten.Inc()
		forgotten++
		n.log.Info("poll left memory: certified and past retention (records and certificate stay in the ledger)", "poll", d.ID)
	}
	return forgotten
}
