package certify

import (
	"bufio"
	"context"
	"maps"
	"slices"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
)

// fromCopies finds, for each replica the plan found missing because its
// node is not a live member, the live full node holding the longest copy
// of its chain (package buddy: each full node copies its batches to a
// buddy before it acknowledges them). A replica whose copy holds every
// record it was known to hold (its gossiped count) is read from that copy
// instead: it joins replicas, peers reads it from its holder, and the
// certificate names it (api.CopySource). A shorter copy is taken too and
// judged like a short export (pending, unless --accept-lost); no copy at
// all leaves the replica missing.
func (c *Certifier) fromCopies(ctx context.Context, poll string, replicas []string, missing []api.Missing, peers map[string]Peer) ([]string, []api.Missing, []api.CopySource) {
	var still []api.Missing
	var sources []api.CopySource
	for _, m := range missing {
		holder, n := c.longestCopy(ctx, poll, m.Replica, peers)
		if n == 0 {
			still = append(still, m)
			continue
		}
		p := peers[holder]
		p.Name, p.Replica, p.CopyOf = p.Name+" (copy of "+m.Replica+")", m.Replica, m.Replica
		peers[m.Replica] = p
		replicas = append(replicas, m.Replica)
		sources = append(sources, api.CopySource{Replica: m.Replica, Holder: holder, Records: n})
		c.log.Info("certifying a replica from its copy: its node is not a live member", "poll", poll, "replica", m.Replica, "holder", holder, "records", n, "expected", m.Expected)
	}
	slices.Sort(replicas)
	return replicas, still, sources
}

// longestCopy asks every live full node for its copy of replica's chain
// and returns the holder of the longest one whose records continue from
// seq 1, and its length (0: none holds any).
func (c *Certifier) longestCopy(ctx context.Context, poll, replica string, peers map[string]Peer) (holder string, n uint64) {
	for _, name := range slices.Sorted(maps.Keys(peers)) {
		p := peers[name]
		if !p.Full || p.CopyOf != "" || name == replica {
			continue
		}
		p.CopyOf = replica
		if got := c.copyLength(ctx, p, poll, replica); got > n {
			holder, n = name, got
		}
	}
	return holder, n
}

// copyLength reads p's copy of replica's chain and counts the records
// that continue it from seq 1; an error ends the count there.
func (c *Certifier) copyLength(ctx context.Context, p Peer, poll, replica string) uint64 {
	body, err := c.cfg.Fetch(ctx, p, poll, 0, hlc.Timestamp{})
	if err != nil {
		return 0
	}
	defer body.Close()
	var n uint64
	for r, err := range ledger.ReadStream(bufio.NewReaderSize(body, 64<<10)) {
		if err != nil || r.Poll != poll || r.Replica != replica || r.Seq != n+1 {
			break
		}
		n++
	}
	return n
}
