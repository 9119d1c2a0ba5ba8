package gossip

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Mesh is the node's NATS side: the embedded server (unless an external
// one is configured) with its routes, gateways and leaf connections, kept
// reaching every member (repairLoop), and the one client connection that
// gossip, catch-up and the edge relay share. The relay borrows it (Conn):
// it never closes it, and reads Conn again for each use.
type Mesh struct {
	cfg         *Config // the gossip's: start picks NATSAddr's port
	self        *meta   // this node's announced NATS addresses (repickPorts rewrites them)
	log         *slog.Logger
	m           *metrics
	members     func() []peer   // the membership, for the links to want
	gossipAddr  func() string   // memberlist's address: the host the listeners advertise
	announce    func()          // announces self again after new ports were picked
	passwords   func() []string // the embedded server's credentials, primary first
	closed      *atomic.Bool    // the gossip's Close: a disconnect then is not a failure
	onReconnect func()

	mu          sync.Mutex // guards emb and nc during (re)starts
	emb         *embedded
	nc          *nats.Conn
	want        [4]string     // the client, route, gateway and leaf addresses as configured (port 0: any)
	poke        chan struct{} // membership changed: check the links
	lastRefusal atomic.Int64  // unix ms of the last refused connection logged
	// leafAvoid is the node an edge's leaf tries last (MoveLeaf), "" none.
	leafAvoid atomic.Pointer[string]
}

// close closes the connection and stops the embedded server.
func (ms *Mesh) close() {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.nc != nil {
		ms.nc.Close()
	}
	if ms.emb != nil {
		ms.emb.shutdown()
	}
}

// flush waits, up to timeout, for what was published to leave.
func (ms *Mesh) flush(timeout time.Duration) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.nc != nil {
		ms.nc.FlushTimeout(timeout)
	}
}

// embedded is the in-process NATS server and what it was configured with.
type embedded struct {
	srv *server.Server
	links
}

// links are the other servers an embedded server connects to.
type links struct {
	routes   map[string]string // node name → route URL
	gateways map[string]string // region → gateway URL
	hubs     []string          // an edge's: leaf URLs of full nodes, in the order tried
}

func (e *embedded) shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// wanted returns the NATS addresses the other members announce: route URLs
// of the nodes in this region, one gateway URL per other region; for an
// edge, the full nodes' leaf URLs.
func (ms *Mesh) wanted() links {
	l := links{routes: map[string]string{}, gateways: map[string]string{}}
	var region, others, last []string
	avoid := ""
	if a := ms.leafAvoid.Load(); a != nil {
		avoid = *a
	}
	for _, p := range ms.members() { // sorted: the first node of a region is its gateway
		m := p.meta
		if p.name == ms.cfg.NodeName {
			continue
		}
		if m.Region == ms.cfg.Region && m.NATSCluster != "" && ms.self.NATSCluster != "" {
			l.routes[p.name] = "nats-route://" + resolve(m.NATSCluster, p.addr)
		}
		if _, ok := l.gateways[m.Region]; !ok && m.Region != ms.cfg.Region && m.NATSGateway != "" && ms.self.NATSGateway != "" {
			l.gateways[m.Region] = "nats://" + resolve(m.NATSGateway, p.addr)
		}
		if ms.cfg.Role == RoleEdge && m.NATSLeaf != "" {
			u := "nats-leaf://" + resolve(m.NATSLeaf, p.addr)
			switch {
			case p.name == avoid:
				last = append(last, u)
			case m.Region == ms.cfg.Region:
				region = append(region, u)
			default:
				others = append(others, u)
			}
		}
	}
	l.hubs = append(append(rotate(region, ms.cfg.NodeName), rotate(others, ms.cfg.NodeName)...), last...)
	return l
}

// LeafHub names the full node (its node name) an edge's leaf connection
// is on: "" while it has none, and at a node that is no edge or uses an
// external NATS server.
func (ms *Mesh) LeafHub() string {
	ms.mu.Lock()
	emb := ms.emb
	ms.mu.Unlock()
	if emb == nil || len(emb.hubs) == 0 {
		return ""
	}
	lz, err := emb.srv.Leafz(nil)
	if err != nil || len(lz.Leafs) == 0 {
		return ""
	}
	return lz.Leafs[0].Name
}

// MoveLeaf starts an edge's embedded NATS server again, so that its leaf
// connects afresh: to its region's full nodes first, then the others',
// avoid (a node name, or "") last, until the next MoveLeaf. The node's
// connection reconnects to it at once. It returns the full node the new
// leaf connection is on (LeafHub), or "" when there is none within
// leafSettle (NATS goes on trying). It does nothing at a node that is no
// edge or uses an external NATS server.
//
// A fresh server, not the leaf's own reconnect: an edge whose full node
// froze or died reconnected to another full node that still held, from
// the gateways, the interest the frozen one had announced for the leaf's
// loop-detection subject ($LDS.…, per server). That full node echoed it,
// and the edge's server took it for a loop: "Loop detected for leafnode
// account … Delaying attempt to reconnect for 30s", 30 s without a link
// (nats-server's leafNodeReconnectDelayAfterLoopDetected; only its tests
// can shorten it). A new server has a new loop-detection subject.
func (ms *Mesh) MoveLeaf(ctx context.Context, avoid string) (hub string) {
	if ms.cfg.Role != RoleEdge || ms.cfg.NATSURL != "" || ms.closed.Load() {
		return ""
	}
	ms.leafAvoid.Store(&avoid)
	if !ms.restartForLeaf(avoid) {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, leafSettle)
	defer cancel()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if hub = ms.LeafHub(); hub != "" || ms.closed.Load() {
			return hub
		}
		select {
		case <-ctx.Done():
			return ""
		case <-t.C:
		}
	}
}

// leafSettle is how long MoveLeaf waits for the new leaf connection.
const leafSettle = 2 * time.Second

// restartForLeaf is MoveLeaf's restart; false when there was nothing to
// restart (not started, closing, or the restart failed).
func (ms *Mesh) restartForLeaf(avoid string) bool {
	l := ms.wanted()
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.emb == nil || ms.closed.Load() { // not started, or closing: close shuts down what is here
		return false
	}
	ms.log.Info("restarting embedded nats to move the leaf connection", "avoid", avoid, "leaf_hubs", len(l.hubs))
	ms.emb.shutdown()
	emb, err := ms.startEmbedded(l)
	if err != nil {
		ms.log.Error("embedded nats restart failed; retrying at the next check", "err", err)
		ms.emb = &embedded{srv: ms.emb.srv, links: links{routes: map[string]string{}, gateways: map[string]string{}}}
		return false
	}
	ms.emb = emb
	return true
}

// rotate starts urls at a place picked by name, so a region's edges
// spread over its full nodes while each edge tries them in a fixed order.
func rotate(urls []string, name string) []string {
	if len(urls) == 0 {
		return nil
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	i := int(h.Sum32() % uint32(len(urls)))
	return append(urls[i:len(urls):len(urls)], urls[:i]...)
}

// startEmbedded starts a NATS server whose cluster is this region (routes
// to its other nodes) and whose gateways reach the other regions. A port
// picked free a moment before (configured as 0) can be taken by another
// socket before the server binds it; then the server is started again on
// newly picked ports (announced to the members), up to three times.
func (ms *Mesh) startEmbedded(l links) (*embedded, error) {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var emb *embedded
		if emb, err = ms.startEmbeddedOnce(l); err == nil {
			return emb, nil
		}
		if !ms.repickPorts() {
			return nil, err
		}
		ms.log.Warn("embedded nats could not bind a port picked free a moment before; trying new ports", "err", err)
	}
	return nil, err
}

// repickPorts picks new ports for the embedded server's listeners that
// were configured as port 0, and announces them; false when there are none.
func (ms *Mesh) repickPorts() bool {
	picked := false
	for i, want := range ms.want {
		if want == "" {
			continue
		}
		if _, port, err := hostPort(want); err != nil || port != 0 {
			continue
		}
		addr, err := freePort(want)
		if err != nil {
			continue
		}
		switch i {
		case 0:
			ms.cfg.NATSAddr = addr
		case 1:
			ms.self.NATSCluster = addr
		case 2:
			ms.self.NATSGateway = addr
		case 3:
			ms.self.NATSLeaf = addr
		}
		picked = true
	}
	if picked && (ms.want[1] != "" || ms.want[2] != "" || ms.want[3] != "") {
		ms.announce()
	}
	return picked
}

// startEmbeddedOnce starts the embedded server once on the configured
// ports, with l's routes, gateways and leaf remotes, and waits until it
// takes connections (or says why it cannot). It is long because it is one
// server.Options, built listener by listener.
func (ms *Mesh) startEmbeddedOnce(l links) (*embedded, error) {
	host, port, err := hostPort(ms.cfg.NATSAddr)
	if err != nil {
		return nil, fmt.Errorf("%w: nats address: %v", ErrConfig, err)
	}
	opts := &server.Options{
		ServerName: ms.cfg.NodeName, Host: cmp.Or(host, "0.0.0.0"), Port: port,
		NoSigs: true, NoLog: true, MaxPayload: 8 << 20,
	}
	// With a cluster key, every port takes only the credential derived
	// from it: the client port (this node's own connection), routes and
	// gateways. A server accepts its primary key's password; towards peers
	// one URL per key is given, so during a key rotation each pair of
	// nodes still shares a password that works.
	passwords := ms.passwords()
	withCreds := func(raw string) ([]*url.URL, error) {
		u, err := url.Parse(raw)
		if err != nil || len(passwords) == 0 {
			return []*url.URL{u}, err
		}
		var out []*url.URL
		for _, pw := range passwords {
			c := *u
			c.User = url.UserPassword(natsUser, pw)
			out = append(out, &c)
		}
		return out, nil
	}
	setAccounts(opts, passwords)
	self := net.ParseIP(splitHost(ms.gossipAddr()))
	if ms.self.NATSCluster != "" {
		h, p, _ := hostPort(ms.self.NATSCluster)
		opts.Cluster = server.ClusterOpts{Name: ms.cfg.Region, Host: cmp.Or(h, ms.bindHost()), Port: p,
			Advertise: resolve(ms.self.NATSCluster, self)}
		if len(passwords) > 0 {
			opts.Cluster.Username, opts.Cluster.Password = natsUser, passwords[0]
		}
		if ms.cfg.TLS != nil {
			opts.Cluster.TLSConfig, opts.Cluster.TLSTimeout = ms.cfg.TLS.Clone(), natsTLSTimeout
		}
		for _, name := range slices.Sorted(maps.Keys(l.routes)) {
			us, err := withCreds(l.routes[name])
			if err != nil {
				return nil, fmt.Errorf("gossip: route to %s: %w", name, err)
			}
			opts.Routes = append(opts.Routes, us...)
		}
	}
	if ms.self.NATSGateway != "" {
		h, p, _ := hostPort(ms.self.NATSGateway)
		opts.Gateway = server.GatewayOpts{Name: ms.cfg.Region, Host: cmp.Or(h, ms.bindHost()), Port: p,
			Advertise: resolve(ms.self.NATSGateway, self), ConnectRetries: 10, ConnectBackoff: true}
		if len(passwords) > 0 {
			opts.Gateway.Username, opts.Gateway.Password = natsUser, passwords[0]
		}
		if ms.cfg.TLS != nil {
			opts.Gateway.TLSConfig, opts.Gateway.TLSTimeout = ms.cfg.TLS.Clone(), natsTLSTimeout
		}
		for _, region := range slices.Sorted(maps.Keys(l.gateways)) {
			us, err := withCreds(l.gateways[region])
			if err != nil {
				return nil, fmt.Errorf("gossip: gateway to %s: %w", region, err)
			}
			opts.Gateway.Gateways = append(opts.Gateway.Gateways, &server.RemoteGatewayOpts{Name: region, URLs: us})
		}
	}
	opts.PingInterval, opts.MaxPingsOut = natsPing, natsPingsOut
	if err := ms.leafOptions(opts, l.hubs, self, withCreds); err != nil {
		return nil, err
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("gossip: embedded nats: %w", err)
	}
	var fatal atomic.Pointer[string]
	srv.SetLoggerV2(natsLogger{log: ms.log, refused: ms.m.refused, lastRefusal: &ms.lastRefusal, now: ms.cfg.Now, fatal: &fatal}, false, false, false)
	srv.Start()
	for deadline := time.Now().Add(10 * time.Second); !srv.ReadyForConnections(100 * time.Millisecond); {
		if f := fatal.Load(); f != nil || time.Now().After(deadline) {
			srv.Shutdown()
			why := "not ready within 10 s"
			if f != nil {
				why = *f
			}
			return nil, fmt.Errorf("gossip: embedded nats did not start on %s: %s", ms.cfg.NATSAddr, why)
		}
	}
	return &embedded{srv: srv, links: l}, nil
}

// leafOptions sets a full node's leaf listener, which takes its region's
// edges with the cluster's credential (and TLS where configured), or an
// edge's one remote: the full nodes' leaf URLs, tried in order (its
// region's first), one connection at a time. Over it the edge gets the
// counters, definitions and certificates and sends its relay batches;
// the full node it reaches carries them through the region's routes and
// gateways.
func (ms *Mesh) leafOptions(opts *server.Options, hubs []string, self net.IP, withCreds func(string) ([]*url.URL, error)) error {
	if ms.self.NATSLeaf != "" {
		h, p, _ := hostPort(ms.self.NATSLeaf)
		opts.LeafNode = server.LeafNodeOpts{Host: cmp.Or(h, ms.bindHost()), Port: p, Advertise: resolve(ms.self.NATSLeaf, self)}
		if pw := ms.passwords(); len(pw) > 0 {
			opts.LeafNode.Username, opts.LeafNode.Password, opts.LeafNode.Account = natsUser, pw[0], natsAccount
		}
		if ms.cfg.TLS != nil {
			opts.LeafNode.TLSConfig, opts.LeafNode.TLSTimeout = ms.cfg.TLS.Clone(), natsTLSTimeout
		}
	}
	if len(hubs) == 0 {
		return nil
	}
	remote := &server.RemoteLeafOpts{NoRandomize: true}
	if len(ms.passwords()) > 0 {
		remote.LocalAccount = natsAccount
	}
	for _, hub := range hubs {
		us, err := withCreds(hub)
		if err != nil {
			return fmt.Errorf("gossip: leaf node remote %s: %w", hub, err)
		}
		remote.URLs = append(remote.URLs, us...)
	}
	if ms.cfg.TLS != nil {
		remote.TLS, remote.TLSConfig, remote.TLSTimeout = true, ms.cfg.TLS.Clone(), natsTLSTimeout
	}
	opts.LeafNode.Remotes = []*server.RemoteLeafOpts{remote}
	// Everything an edge sends goes over this one link: when it closes
	// (its full node died) the edge dials the next one at once, not
	// after NATS's second (a dead full node's clients waited out that
	// second and its jitter). Its pings stay natsPing: pinged every
	// 500 ms, a full node too busy to answer for 1.5 s lost its edges'
	// links and the answers on them (and a lifecycle test's edge its hub
	// under the full test command, once).
	opts.LeafNode.ReconnectInterval = leafReconnect
	return nil
}

// How every embedded NATS server pings its links. A peer that froze (not
// closed: a stopped process, a stuck host) is noticed in about
// natsPing*(natsPingsOut+1), not NATS's 2-minute default: an edge's leaf
// moves to the next full node (everything the edge does goes through
// that one connection), and a region's gateway to a frozen full node of
// another region is dropped and made again to a live one — until then
// the replies that other region sends this one (a relay answer, a buddy's
// copy acknowledgement) went into the frozen node and were lost.
const (
	natsPing     = 2 * time.Second
	natsPingsOut = 2
	// An edge dials the next full node 100-200 ms after it lost its leaf
	// link (NATS adds up to the interval again as jitter).
	leafReconnect = 100 * time.Millisecond
)

// start starts the embedded server (unless an external one is
// configured), connects, and has subscribe take the connection's
// subscriptions before anything else may use it.
func (ms *Mesh) start(subscribe func(*nats.Conn) error) error {
	url := ms.cfg.NATSURL
	if url == "" {
		emb, err := ms.startEmbedded(ms.wanted())
		if err != nil {
			return err
		}
		ms.emb = emb
		url = emb.srv.ClientURL()
	}
	var auth []nats.Option
	if ms.cfg.NATSURL == "" {
		if pw := ms.passwords(); len(pw) > 0 {
			auth = append(auth, nats.UserInfo(natsUser, pw[0]))
		}
	} else {
		ext, err := ms.externalOptions()
		if err != nil {
			return err
		}
		auth = append(auth, ext...)
	}
	nc, err := nats.Connect(url, append(auth,
		nats.Name(ms.cfg.NodeName),
		nats.NoEcho(),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(func(attempts int) time.Duration {
			// Linear backoff capped at a second: a healed link is used
			// again within a second (the cost is one dial a second while
			// NATS is down).
			return min(time.Duration(attempts)*100*time.Millisecond, time.Second)
		}),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if c.IsClosed() || ms.closed.Load() {
				return // our own Close, not a failure
			}
			ms.log.Warn("nats disconnected; reconnecting", "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			ms.log.Info("nats reconnected", "url", c.ConnectedUrlRedacted())
			ms.onReconnect()
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			ms.m.dropped.WithLabelValues(pathNATS, "slow_consumer").Inc()
			ms.log.Warn("nats", "err", err)
		}),
	)...)
	if err != nil {
		if ms.emb != nil {
			ms.emb.shutdown()
		}
		return fmt.Errorf("gossip: nats connect %s: %w", url, err)
	}
	if err := subscribe(nc); err != nil {
		nc.Close()
		if ms.emb != nil {
			ms.emb.shutdown()
		}
		return fmt.Errorf("gossip: nats subscribe: %w", err)
	}
	ms.mu.Lock()
	ms.nc = nc
	ms.mu.Unlock()
	return nil
}

// natsTLSTimeout bounds a route's or gateway's TLS handshake (seconds;
// NATS's default of 2 s is short for a handshake across continents).
const natsTLSTimeout = 5

// externalOptions are the credentials and TLS settings for an external
// NATS server (a user and password travel in its URL).
func (ms *Mesh) externalOptions() ([]nats.Option, error) {
	var out []nats.Option
	switch {
	case ms.cfg.NATSCredsFile != "" && ms.cfg.NATSNKeyFile != "":
		return nil, &FieldError{Field: "NATSCredsFile", Err: ErrTwoNATSCredentials}
	case ms.cfg.NATSCredsFile != "":
		if _, err := os.Stat(ms.cfg.NATSCredsFile); err != nil {
			return nil, &FieldError{Field: "NATSCredsFile", Err: err}
		}
		out = append(out, nats.UserCredentials(ms.cfg.NATSCredsFile))
	case ms.cfg.NATSNKeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(ms.cfg.NATSNKeyFile)
		if err != nil {
			return nil, &FieldError{Field: "NATSNKeyFile", Value: ms.cfg.NATSNKeyFile, Err: err}
		}
		out = append(out, opt)
	}
	if ms.cfg.NATSTLS != nil {
		out = append(out, nats.Secure(ms.cfg.NATSTLS.Clone()))
	}
	return out, nil
}

// Conn returns the node's NATS connection, nil before Start: the relay
// (package relay) sends and answers on it.
func (ms *Mesh) Conn() *nats.Conn {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.nc
}

// Connected reports whether the node's NATS connection is up.
func (ms *Mesh) Connected() bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.nc != nil && ms.nc.IsConnected()
}

// EmbeddedURL returns the embedded NATS server's client URL, or ""
// when the node uses an external server (or before Start).
func (ms *Mesh) EmbeddedURL() string {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.emb == nil {
		return ""
	}
	return ms.emb.srv.ClientURL()
}

// bindHost is where memberlist binds: the route and gateway listeners
// bind there too when their addresses name no host, so a node whose
// gossip is on a private interface does not open NATS on every one.
func (ms *Mesh) bindHost() string {
	h, _, err := hostPort(ms.cfg.BindAddr)
	if err != nil || h == "" {
		return "0.0.0.0"
	}
	return h
}
