package node

import (
	"context"
	"time"

	"tally/api"
)

// closeWait bounds how long a close waits for the other full nodes to
// confirm it: far above a push's round trip (milliseconds within a
// continent, ~300 ms around the world), short enough for a producer on
// air. A node that has not confirmed by then is named in the answer.
const closeWait = time.Second

// closePoll makes a close written at this node hold before the host is
// answered (admin.Config.Closed): this node's votes in flight are answered
// first, then the new definition is pushed to every full node, which
// applies it, answers its own votes in flight and confirms. So the last
// "accepted" of any node that confirmed comes before the close's answer
// (docs/certification.md, "The close").
func (n *Node) closePoll(ctx context.Context, pollID string) *api.CloseReport {
	start := time.Now()
	n.ingest.Settle()
	ctx, cancel := context.WithTimeout(ctx, closeWait)
	defer cancel()
	p, err := n.gossip.PushDefinition(ctx, pollID)
	rep := &api.CloseReport{Confirmed: append([]string{n.replica}, p.Confirmed...), Unconfirmed: p.Unconfirmed,
		TookMs: float64(time.Since(start).Microseconds()) / 1000}
	n.m.closeWait.Observe(time.Since(start).Seconds())
	n.m.closeUnconfirmed.Add(float64(len(p.Unconfirmed)))
	if err != nil || len(p.Unconfirmed) > 0 {
		n.log.Warn("close not confirmed by every full node: those go on counting until they hear of it, and their votes count",
			"poll", pollID, "unconfirmed", p.Unconfirmed, "err", err)
	} else {
		n.log.Info("close confirmed by every full node", "poll", pollID, "confirmed", rep.Confirmed, "took_ms", rep.TookMs)
	}
	return rep
}
