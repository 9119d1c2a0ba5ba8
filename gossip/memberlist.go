package gossip

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"log"
	"maps"
	"net"
	"slices"
	"strings"
	"tally/api"
	"time"

	"github.com/hashicorp/memberlist"
)

// startMemberlist creates the memberlist with this node's metadata and the
// push/pull delegate.
func (g *Gossip) startMemberlist() error {
	cfg := g.cfg
	mc, err := profileConfig(cfg.Profile)
	if err != nil {
		return err
	}
	if _, err := g.self.encode(memberlist.MetaMaxSize); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err) // else it would announce none, and be refused
	}
	if cfg.PushPull > 0 {
		mc.PushPullInterval = cfg.PushPull
	}
	// A node that restarts at a new address (a container rescheduled) may
	// take its name back once the old incarnation has been dead this long.
	mc.DeadNodeReclaimTime = 10 * mc.ProbeInterval
	mc.Name = cfg.NodeName
	mc.Delegate = &delegate{g: g}
	mc.Events = &events{g: g}
	mc.Conflict = &conflicts{g: g}
	if g.single() {
		mc.Alive, mc.Merge = &loner{g: g}, &noMerge{g: g}
	} else {
		g.gate = &protocolGate{g: g}
		mc.Alive, mc.Merge = g.gate, g.gate
	}
	g.keyWatch = newKeyWatch(g)
	mc.Logger = log.New(g.keyWatch, "", 0)
	if len(cfg.Keys) > 0 {
		kr, err := memberlist.NewKeyring(cfg.Keys, cfg.Keys[0])
		if err != nil {
			return fmt.Errorf("%w: gossip key: %v", ErrConfig, err)
		}
		mc.Keyring = kr
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	host, port, err := hostPort(cfg.BindAddr)
	if err != nil {
		return fmt.Errorf("%w: gossip address: %v", ErrConfig, err)
	}
	if host, err = g.gossipBindHost(host); err != nil {
		return err
	}
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{host}, BindPort: port, Logger: mc.Logger,
	})
	if err != nil {
		return &FieldError{Field: "BindAddr", Value: cfg.BindAddr, Err: err}
	}
	mc.BindAddr, mc.BindPort = host, nt.GetAutoBindPort()
	if cfg.AdvertiseAddr != "" {
		if mc.AdvertiseAddr, mc.AdvertisePort, err = hostPort(cfg.AdvertiseAddr); err != nil {
			nt.Shutdown()
			return fmt.Errorf("%w: advertise address: %v", ErrConfig, err)
		}
	} else {
		mc.AdvertisePort = mc.BindPort
	}
	var transport memberlist.NodeAwareTransport = nt
	if cfg.WrapTransport != nil {
		transport = cfg.WrapTransport(nt)
	}
	mc.Transport = transport
	ml, err := memberlist.Create(mc)
	if err != nil {
		transport.Shutdown()
		return fmt.Errorf("gossip: memberlist: %w", err)
	}
	g.ml = ml
	return nil
}

// gossipBindHost is the host memberlist listens on: loopback for a key-less single
// node, every interface when none is given.
func (g *Gossip) gossipBindHost(host string) (string, error) {
	switch {
	case g.single():
		return singleBindHost(host)
	case host == "":
		return "0.0.0.0", nil
	}
	return host, nil
}

// GossipAddr returns the address memberlist announces (host:port), or ""
// before Start or after a failed one.
func (g *Gossip) GossipAddr() string {
	if g.ml == nil {
		return ""
	}
	return g.ml.LocalNode().Address()
}

// loner refuses every member but this node: a node without a cluster key
// is a single node, whoever reaches its gossip port.
type loner struct{ g *Gossip }

// NotifyAlive rejects any other node.
func (l *loner) NotifyAlive(peer *memberlist.Node) error {
	if peer.Name == l.g.cfg.NodeName {
		return nil
	}
	l.g.m.dropped.WithLabelValues(pathPushPull, "no_key").Inc()
	return fmt.Errorf("gossip: %s at %s refused: this node has no cluster key and takes no members", peer.Name, peer.Address())
}

// conflicts hears from memberlist about two members claiming one name.
type conflicts struct{ g *Gossip }

// NotifyConflict is called when a member announces a name already held at
// another address. When the name is ours, Start refuses to go on (the
// newcomer) or the conflict is logged (the node already in the cluster).
func (c *conflicts) NotifyConflict(existing, other *memberlist.Node) {
	g := c.g
	if existing.Name != g.cfg.NodeName {
		g.log.Error("two members claim one node name", "name", existing.Name, "addr", existing.Address(), "other_addr", other.Address())
		return
	}
	addr := other.Address()
	if m, err := decodeMeta(other.Meta); err == nil && m.Replica == g.cfg.Replica {
		// Our own earlier incarnation (same data dir), restarted at a new
		// address before the cluster saw it go: memberlist lets the name
		// be reclaimed once the old address is found dead.
		g.log.Info("this node's previous incarnation is still listed; it is replaced once found gone", "name", existing.Name, "old_addr", addr)
		return
	}
	g.conflict.CompareAndSwap(nil, &addr)
	g.log.Error("another member uses this node's name", "name", existing.Name, "other_addr", addr)
}

// delegate plugs Tally's state into memberlist.
type delegate struct{ g *Gossip }

// NodeMeta is this node's metadata: region, replica, role and addresses.
func (d *delegate) NodeMeta(limit int) []byte {
	b, err := d.g.self.encode(limit)
	if err != nil {
		d.g.log.Error("node metadata", "err", err)
		return nil
	}
	return b
}

// NotifyMsg receives memberlist user messages: ballot catch-up while NATS
// is down (see catchup_memberlist.go).
func (d *delegate) NotifyMsg(b []byte) { d.g.catchup.userMsg(bytes.Clone(b)) }

// GetBroadcasts: none (the fast path is NATS).
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState is the full state sent in a push/pull (over TCP).
func (d *delegate) LocalState(join bool) []byte {
	if d.g.single() {
		return nil // a single node tells nobody its state
	}
	msg, err := d.g.fullState()
	if err != nil {
		d.g.log.Error("full state", "err", err)
		return nil
	}
	b, err := Encode(msg)
	if err != nil {
		d.g.log.Error("encode full state", "err", err)
		return nil
	}
	b = d.g.keys.seal(b)
	d.g.m.bytes.WithLabelValues(pathPushPull, "out").Add(float64(len(b)))
	d.g.m.messages.WithLabelValues(pathPushPull, "out").Inc()
	return b
}

// MergeRemoteState merges a peer's full state.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {
	if len(buf) == 0 {
		return
	}
	d.g.receive(pathPushPull, buf)
}

// events keeps this node's copy of the membership (memberlist's own
// Members() hands out nodes that its goroutines keep writing to) and lets
// the NATS side react to changes.
type events struct{ g *Gossip }

// peer is a member as the events reported it.
type peer struct {
	name   string
	addr   net.IP
	gossip string
	meta   meta
}

func (e *events) NotifyJoin(n *memberlist.Node) {
	if n.Name != e.g.cfg.NodeName {
		e.g.joined.Store(true)
	}
	p := e.g.track(n)
	e.g.log.Info("member joined", "name", n.Name, "region", p.meta.Region, "replica", p.meta.Replica, "role", p.meta.Role, "addr", p.gossip)
	e.g.mesh.pokeRepair()
}

func (e *events) NotifyLeave(n *memberlist.Node) {
	e.g.peersMu.Lock()
	delete(e.g.members, n.Name)
	// memberlist does not say here whether the node failed or left; either
	// way it is retried: a failed node may be behind a partition that
	// heals, and a departed one just does not answer.
	e.g.failed[n.Name] = failedPeer{addr: n.Address(), since: time.Now()}
	e.g.peersMu.Unlock()
	e.g.log.Info("member gone", "name", n.Name, "addr", n.Address())
}

func (e *events) NotifyUpdate(n *memberlist.Node) {
	e.g.track(n)
	e.g.mesh.pokeRepair()
}

// track copies a member reported by memberlist (called with memberlist's
// lock held, so reading n is safe here).
func (g *Gossip) track(n *memberlist.Node) peer {
	defer func() {
		g.peersMu.Lock()
		delete(g.failed, n.Name)
		g.peersMu.Unlock()
	}()
	m, err := decodeMeta(n.Meta)
	if err != nil {
		g.log.Warn("member with unreadable metadata", "name", n.Name, "err", err)
	}
	p := peer{name: n.Name, addr: append(net.IP(nil), n.Addr...), gossip: n.Address(), meta: m}
	if pub, err := base64.StdEncoding.DecodeString(m.Pub); err == nil && len(pub) == ed25519.PublicKeySize && m.Replica != "" {
		if err := g.cfg.State.Defs.LearnKey(m.Replica, pub); err != nil {
			g.m.dropped.WithLabelValues(pathPushPull, "key_conflict").Inc()
			g.log.Error("member announces a signing key its replica is not known by", "name", n.Name, "replica", m.Replica, "err", err)
		}
	}
	g.peersMu.Lock()
	g.members[n.Name] = p
	g.peersMu.Unlock()
	g.known.remember(p)
	return p
}

// memberList returns the tracked members, sorted by name.
func (g *Gossip) memberList() []peer {
	g.peersMu.Lock()
	out := slices.Collect(maps.Values(g.members))
	g.peersMu.Unlock()
	slices.SortFunc(out, func(a, b peer) int { return strings.Compare(a.name, b.name) })
	return out
}

// failedPeer is a member memberlist declared dead.
type failedPeer struct {
	addr  string
	since time.Time
}

// Failed members are retried this long, then forgotten.
const forgetFailedAfter = 72 * time.Hour

// reconnectLoop retries failed members: memberlist never talks to a node
// it declared dead again, so without this two sides of a healed partition
// would stay apart (Serf does the same).
func (g *Gossip) reconnectLoop(ctx context.Context) {
	defer g.wg.Done()
	t := time.NewTicker(g.cfg.Reconnect)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		g.peersMu.Lock()
		var addrs []string
		for name, f := range g.failed {
			if time.Since(f.since) > forgetFailedAfter {
				delete(g.failed, name)
				continue
			}
			addrs = append(addrs, f.addr)
		}
		g.peersMu.Unlock()
		if len(addrs) == 0 {
			continue
		}
		if n, err := g.ml.Join(addrs); n > 0 {
			g.log.Info("reconnected to failed members", "count", n)
		} else {
			g.log.Debug("failed members still unreachable", "addrs", addrs, "err", err)
		}
	}
}

// Member is one node of the cluster as memberlist sees it: the API's
// member of GET /v1/cluster.
type Member = api.ClusterMember

// Joined reports whether this node has been in a cluster with another
// member since it started, or needs none (no --join): a node whose seeds
// never answered — down, or holding another gossip key — is alone, and
// must not report ready as if it had joined (issue 46).
func (g *Gossip) Joined() bool { return len(g.cfg.Join) == 0 || g.joined.Load() }

// KeyMismatch reports whether, within the last minute, this node met
// gossip messages sealed with another key than its own, or a seed refused
// its join for its key (keys.go).
func (g *Gossip) KeyMismatch() bool { return g.keyWatch != nil && g.keyWatch.seen() }

// MembersShort reports how many members this node sees and whether that
// is fewer than ExpectMembers.
func (g *Gossip) MembersShort() (seen int, short bool) {
	seen = len(g.Members())
	return seen, g.cfg.ExpectMembers > 0 && seen < g.cfg.ExpectMembers
}

// Members returns the live members, this node included, sorted by name.
func (g *Gossip) Members() []Member {
	var out []Member
	for _, p := range g.memberList() {
		out = append(out, Member{
			Name: p.name, Region: p.meta.Region, Replica: p.meta.Replica, Role: p.meta.Role,
			HTTPAddr: resolve(p.meta.HTTP, p.addr), HTTPS: p.meta.HTTPS, AdminAddr: resolve(p.meta.Admin, p.addr),
			Protocol: protocolOf(p.meta), Release: p.meta.Rel,
			Gossip: p.gossip, State: "alive", Self: p.name == g.cfg.NodeName,
		})
	}
	return out
}

// Replica is how fresh the state heard from one replica is: the API's
// replica of GET /v1/cluster.
type Replica = api.ClusterReplica

// Staleness returns, per replica heard from (this one included, at 0),
// the age of the newest state received from it.
func (g *Gossip) Staleness() []Replica {
	now := g.cfg.Now().UnixMilli()
	out := []Replica{{Replica: g.cfg.Replica, Region: g.cfg.Region, Self: true}}
	for _, h := range g.cfg.State.Replicas.HeardFrom() {
		if h.Replica != g.cfg.Replica {
			out = append(out, Replica{Replica: h.Replica, Region: h.Region, StalenessMs: max(now-h.AtMs, 0)})
		}
	}
	return out
}

// profileConfig is memberlist's timing for a --gossip-profile.
func profileConfig(profile string) (*memberlist.Config, error) {
	var mc *memberlist.Config
	switch profile {
	case "", "wan":
		mc = memberlist.DefaultWANConfig()
	case "lan":
		mc = memberlist.DefaultLANConfig()
	case "local":
		// Fast, for loopback and tests, yet not so fast that a process
		// starved of a core for half a second (race-built clusters beside a
		// browser on two cores) is declared dead and rejoins, over and over:
		// a suspect has 1.2 s (with confirmations from others) to 3.6 s to
		// refute before it is gone. The earlier 400 ms flapped under load.
		mc = memberlist.DefaultLocalConfig()
		mc.ProbeInterval = 400 * time.Millisecond
		mc.ProbeTimeout = 200 * time.Millisecond
		mc.GossipInterval = 50 * time.Millisecond
		mc.SuspicionMult = 3
		mc.SuspicionMaxTimeoutMult = 3
		mc.GossipToTheDeadTime = time.Second
	default:
		return nil, fmt.Errorf("%w: gossip profile %q (want wan, lan or local)", ErrConfig, profile)
	}
	return mc, nil
}
