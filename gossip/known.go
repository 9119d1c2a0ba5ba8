package gossip

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"tally/state"
)

// A node remembers the cluster across a restart, as Serf's snapshot does:
// every full member it saw (name, gossip address, replica) is kept in the
// Store, and a start joins them again in the background, --join or not.
// With what the state kept (which replicas hold records of each poll), a
// node that restarts knows whom it is missing before anyone reconnects to
// it: it is neither synced nor caught up until it has merged a member's
// full state and heard from every replica known to hold records of a poll
// not yet certified (Synced, CaughtUp).

const memberPrefix = "member/"

// knownMember is a full member as kept in the Store.
type knownMember struct {
	Addr    string `json:"addr"` // memberlist host:port
	Replica string `json:"replica"`
	Region  string `json:"region"`
}

// known is what this node kept of the cluster, and whom it heard from
// since it started.
type known struct {
	g *Gossip

	mu      sync.Mutex
	members map[string]knownMember // node name → as kept
	heard   map[string]bool        // replica → a message of it was applied since the start
	expect  bool                   // at Start: other replicas hold records, or members were kept
}

// load reads the members kept in the Store.
func (k *known) load() {
	g := k.g
	k.members = map[string]knownMember{}
	k.heard = map[string]bool{}
	if g.cfg.Store == nil || g.single() {
		return // a single node contacts nobody, whatever its data dir kept
	}
	for name, value := range g.cfg.Store.MetaWithPrefix(memberPrefix) {
		var m knownMember
		if err := json.Unmarshal(value, &m); err != nil || m.Addr == "" {
			g.log.Warn("ignoring a kept member that does not decode", "name", name, "err", err)
			continue
		}
		if node := name[len(memberPrefix):]; node != g.cfg.NodeName {
			k.members[node] = m
		}
	}
}

// remember keeps a full member other than this node, when it is new or
// moved.
func (k *known) remember(p peer) {
	g := k.g
	if g.cfg.Store == nil || p.name == g.cfg.NodeName || p.meta.Role != RoleFull || p.meta.Replica == "" || g.single() {
		return
	}
	m := knownMember{Addr: p.gossip, Replica: p.meta.Replica, Region: p.meta.Region}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.members[p.name] == m {
		return
	}
	if was, ok := k.members[p.name]; ok && was.Replica != m.Replica {
		// The same node name with another replica id: its data dir is new
		// (a replacement, or a disk lost). Said loudly, once, at every
		// member that knew the old one.
		g.log.Warn("a member is back under a known name as a new replica: it replaces the old one, whose acknowledged votes are read from its buddy's copies; nobody waits for the old one (docs/operations.md, \"A lost node\")",
			"name", p.name, "replaces", was.Replica, "replica", m.Replica, "region", m.Region)
	}
	b, _ := json.Marshal(m)
	if err := g.cfg.Store.PutMeta(memberPrefix+p.name, b); err != nil {
		g.log.Warn("cannot keep a member for the next start", "name", p.name, "err", err)
		return
	}
	k.members[p.name] = m
}

// keptAddrs returns the gossip addresses of the members kept, sorted.
func (k *known) keptAddrs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, m := range k.members {
		out = append(out, m.Addr)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// expectsPeers decides, at Start, whether this node belongs to a cluster
// even without --join: it kept members, or its state holds records of
// other replicas (state.LoadTallies).
func (k *known) expectsPeers() bool {
	g := k.g
	if g.single() {
		return false
	}
	if len(k.keptAddrs()) > 0 {
		return true
	}
	for _, d := range g.cfg.State.Defs.Polls() {
		known, err := g.cfg.State.KnownRecords(d.ID)
		if err != nil {
			continue
		}
		for r := range known {
			if r != g.cfg.Replica {
				return true
			}
		}
	}
	return false
}

// alonePlanned reports whether this node runs alone by design: no seeds,
// and nothing kept says there are others.
func (k *known) alonePlanned() bool { return len(k.g.cfg.Join) == 0 && !k.expect }

// heardFrom records that a message of replica was applied.
func (k *known) heardFrom(replica string) {
	k.mu.Lock()
	k.heard[replica] = true
	k.mu.Unlock()
}

// Unheard returns the replicas known to hold records of a poll that is
// gossiped and not yet certified, from which nothing arrived since this
// node started: whom it is still missing. Sorted. Once this node has
// merged a member's full state (and with it the membership), a replica
// that is not a live member is not waited for: it is gone (killed,
// drained, replaced), and what it took is held by the others
// (steward.go); a replacement, or any later restart, does not wait out
// --catch-up-wait for it.
func (g *Gossip) Unheard() []string {
	live, _, trusted := liveFull(g)
	now := g.cfg.Now().UnixMilli()
	want := map[string]bool{}
	for _, d := range g.cfg.State.Defs.Polls() {
		if !g.gossiped(d, now) {
			continue
		}
		if c, ok := g.cfg.State.Defs.Certificate(d.ID); ok && c.Status == state.Reconciled {
			continue
		}
		known, err := g.cfg.State.KnownRecords(d.ID)
		if err != nil {
			continue
		}
		for r := range known {
			if r != g.cfg.Replica {
				want[r] = true
			}
		}
	}
	g.known.mu.Lock()
	defer g.known.mu.Unlock()
	var out []string
	for r := range want {
		if !g.known.heard[r] && (!trusted || live[r]) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// rejoinKept joins the kept members in the background until one answers
// (or ctx ends): a restarted node finds its cluster itself instead of
// waiting for the others to notice it is back.
func (k *known) rejoinKept(ctx context.Context, addrs []string) {
	g := k.g
	defer g.wg.Done()
	wait := 100 * time.Millisecond
	for {
		if n, err := g.ml.Join(addrs); n > 0 {
			g.log.Info("joined the members kept from the last run", "answered", n, "kept", len(addrs))
			return
		} else {
			g.log.Debug("members kept from the last run not reachable yet", "addrs", addrs, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// shortLogEvery is how often a refused certificate of one poll is logged
// (full-state exchanges carry it again every push/pull).
const shortLogEvery = time.Minute

// checkCertificate vets a certificate received on path from replica from
// (Config.CheckCertificate) and reports whether it may be applied. One
// that leaves out records this node knows of is dropped and counted
// (tally_gossip_dropped_total{reason="short_certificate"}), and logged
// with the coordinator that wrote it.
func (k *known) checkCertificate(path, from string, c *state.Certificate) bool {
	g := k.g
	if g.cfg.CheckCertificate == nil || c.Status != state.Reconciled {
		return true
	}
	if held, ok := g.cfg.State.Defs.Certificate(c.Poll); ok && held.Status == state.Reconciled && !c.TS.Less(held.TS) {
		// It would not replace the one held (every full state carries it
		// again): nothing to decode. The held one is the certifier's to
		// recheck.
		return true
	}
	err := g.cfg.CheckCertificate(*c)
	if err == nil {
		return true
	}
	g.m.dropped.WithLabelValues(path, "short_certificate").Inc()
	now := time.Now().UnixMilli()
	if last, ok := g.shortLog.Load(c.Poll); !ok || now-last.(int64) >= shortLogEvery.Milliseconds() {
		g.shortLog.Store(c.Poll, now)
		g.log.Error("refusing a certificate that leaves out records this node knows of; the poll's result stays pending here and the live tally stays on air",
			"poll", c.Poll, "certified_by", c.By, "relayed_by", from, "err", err)
	}
	return false
}
