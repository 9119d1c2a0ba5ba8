package gossip

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"tally/hlc"
	"tally/ids"
	"tally/state"
)

// ErrConfig is returned for a configuration gossip cannot run with.
var ErrConfig = errors.New("gossip: bad configuration")

// FieldError is a Config field gossip cannot run with, named as in Config
// (BindAddr, NATSAddr, …): the caller says it in its own terms (node
// names the flag). It wraps ErrConfig and the cause.
type FieldError struct {
	Field string // the Config field
	Value string // its value as given; "" when it says nothing more
	Err   error
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("gossip: %s: %v", e.Field, e.Err)
	}
	return fmt.Sprintf("gossip: %s %s: %v", e.Field, e.Value, e.Err)
}

func (e *FieldError) Unwrap() []error { return []error{ErrConfig, e.Err} }

// ErrTwoNATSCredentials is a FieldError's cause when both NATSCredsFile
// and NATSNKeyFile are set.
var ErrTwoNATSCredentials = errors.New("give NATSCredsFile or NATSNKeyFile, not both")

// Clock is the node's hybrid logical clock.
type Clock interface {
	Now() (hlc.Timestamp, error)
	Update(remote hlc.Timestamp) error
}

// Config configures gossip. Zero durations mean the defaults.
type Config struct {
	NodeName string // unique in the cluster
	Region   string
	Replica  string
	Role     string // RoleFull or RoleEdge
	HTTPAddr string // announced to the others (empty host: the gossip address)
	HTTPS    bool   // the HTTP address (and the admin one) serves TLS only
	// AdminAddr is the admin listener announced to the others (empty: none;
	// empty or unspecified host: the gossip address), where tally cluster
	// asks an edge where it relays.
	AdminAddr string
	// Release is the node's build version, announced to the others for
	// the operators' view (truncated to 24 bytes); "": none.
	Release string

	BindAddr      string   // memberlist host:port (port 0: any)
	AdvertiseAddr string   // host:port announced instead of BindAddr's
	Join          []string // memberlist seeds
	// ExpectMembers is how many members, this node included, the cluster
	// should have; fewer seen is a split or a lost node (MembersShort).
	// 0: not set.
	ExpectMembers int
	// ExpectFull is how many full nodes the cluster has, counted apart
	// from the edges (which an autoscaler adds and removes): fewer seen is
	// a lost full node. It feeds a metric and an alert only, never
	// readiness: a rolling upgrade restarts one full node at a time, and
	// the others must go on answering.
	ExpectFull int
	// Keys encrypt gossip: the first is the primary (encrypts); the others
	// are also accepted (key rotation). Each 16, 24 or 32 bytes; none:
	// unencrypted gossip.
	Keys [][]byte
	// AllowInsecure lets a node without Keys join and accept members (and
	// open NATS routes and gateways): anyone who reaches those ports can
	// then rewrite its state. For a throwaway cluster on one machine only.
	// Without it, a node without a key is a single node.
	AllowInsecure bool
	// PublicKey is this replica's Ed25519 key, announced to the members so
	// they can verify the certificates it signs.
	PublicKey ed25519.PublicKey
	// Profile picks memberlist's timing: "wan" (default), "lan" or
	// "local" (fast, for tests on loopback).
	Profile string
	// PushPull is the anti-entropy interval; 0: the profile's (WAN 60 s,
	// LAN 30 s, local 15 s).
	PushPull time.Duration
	// Reconnect is how often members declared dead are tried again;
	// default 10s (local profile: 1s).
	Reconnect time.Duration
	// WrapTransport, when set, wraps memberlist's network transport (tests
	// use it to partition or delay the cluster).
	WrapTransport func(memberlist.NodeAwareTransport) memberlist.NodeAwareTransport

	// NATSURL is an external NATS to use; empty: an embedded server.
	NATSURL string
	// Embedded server listeners (port 0: any free port). ClusterAddr,
	// GatewayAddr and LeafAddr empty: no routes, gateways or leaf nodes.
	// A full node's leaf listener takes its region's edges; an edge opens
	// none of the three and connects to its region's full nodes as a leaf
	// node instead.
	NATSAddr        string
	NATSClusterAddr string
	NATSGatewayAddr string
	NATSLeafAddr    string
	// Cluster names the NATS subject (tally.<Cluster>.state).
	Cluster string
	// TLS, when set, encrypts the embedded server's routes and gateways
	// and authenticates both ends of each: it must hold this node's
	// certificate (Certificates or GetCertificate and
	// GetClientCertificate), the CAs that verify the peers (RootCAs and
	// ClientCAs) and ClientAuth. nil: routes and gateways in the clear.
	TLS *tls.Config
	// External NATS credentials and TLS (with NATSURL): a creds file (JWT
	// and seed) or an nkey seed file, and the client TLS configuration
	// (nil: TLS only if the URL says tls://, verified by the system roots).
	// A user and password travel in NATSURL.
	NATSCredsFile string
	NATSNKeyFile  string
	NATSTLS       *tls.Config

	PublishEvery   time.Duration // most frequent delta publication; default 100ms
	HeartbeatEvery time.Duration // a message even when nothing changed; default 1s
	// Retention: a poll stops being gossiped this long after it closed
	// (plus grace); default 24h.
	Retention time.Duration

	State *state.State // required
	Clock Clock        // required
	// Store keeps the full members seen, so a restart joins them again
	// (known.go); nil: nothing kept.
	Store state.Store
	// CheckCertificate, when set, vets a reconciled certificate received
	// from another node before it is applied (certify.Certifier.Check): one
	// that fails is dropped, counted and logged, and the poll's result
	// stays as it was here.
	CheckCertificate func(state.Certificate) error
	// UnknownKey, when set, is told of a certificate dropped because its
	// certifier's key is not known here (a replica gone before this node
	// joined: a replacement); it may learn the key and apply the
	// certificate itself. It must not block.
	UnknownKey func(state.Certificate)
	// Settle, at a full node, waits for its votes in flight, before it
	// confirms a pushed definition (push.go; ingest's Pipeline.Settle);
	// nil: nothing to wait for.
	Settle     func()
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	Now        func() time.Time
}

// Gossip is a node's membership and state exchange.
type Gossip struct {
	cfg     Config
	log     *slog.Logger
	m       *metrics
	self    meta
	subject string

	keys     keyring       // seals and opens every gossip payload
	keyWatch *keyWatch     // memberlist's log, read for another key's messages (keys.go)
	gate     *protocolGate // refuses members outside the protocol window (meta.go); nil at a single node
	joined   atomic.Bool   // another member was seen once (Joined)
	ml       *memberlist.Memberlist
	conflict atomic.Pointer[string] // address of another member that holds our name
	peersMu  sync.Mutex
	members  map[string]peer       // node name → member, kept by the events
	failed   map[string]failedPeer // node name → members declared dead, retried

	mesh    *Mesh    // NATS: the embedded server and the connection (nats.go)
	catchup *catchUp // other replicas' ballots fetched after a start (catchup.go)

	pub publisher // owned by publishLoop

	lastNoKey atomic.Int64 // unix ms of the last message a single node dropped, logged
	localPass string       // a single node's embedded NATS client password (single.go)
	order     order        // the newest send time per path and replica (replay.go)

	userMu sync.Mutex // orders memberlist answers' wg.Add before Close's wg.Wait

	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool

	refreshNow atomic.Bool // publish a full refresh at the next tick
	budgetNow  atomic.Bool // a peer asked for the whole token-budget view
	budgetAsk  atomic.Bool // ask the peers for theirs (NATS reconnected)
	synced     atomic.Bool // merged a peer's full state (or runs alone by design)
	caughtUp   atomic.Bool // synced, and no ballot missing at the last catch-up look
	known      known       // members kept across restarts, replicas heard since the start (known.go)
	shortLog   sync.Map    // poll → unix ms a short certificate of it was last logged
}

// Synced reports whether this node has merged another member's full state
// since it started, or runs alone by design: no seeds, and nothing it kept
// (members, other replicas' records) says it belongs to a cluster. Until
// then its view of the cluster's counts may be incomplete.
func (g *Gossip) Synced() bool { return g.synced.Load() || g.known.alonePlanned() }

// New checks cfg and registers the metrics. Start joins the cluster.
func New(cfg Config) (*Gossip, error) {
	if cfg.State == nil || cfg.Clock == nil {
		return nil, fmt.Errorf("%w: State and Clock are required", ErrConfig)
	}
	for what, v := range map[string]string{"node name": cfg.NodeName, "region": cfg.Region, "replica": cfg.Replica} {
		if err := ids.Valid(v); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrConfig, what, err)
		}
	}
	cfg.Role = cmp.Or(cfg.Role, RoleFull)
	cfg.BindAddr = cmp.Or(cfg.BindAddr, DefaultBindAddr)
	if err := errors.Join(CheckRole(cfg.Role), CheckKeys(cfg.Keys)); err != nil {
		return nil, err
	}
	if len(cfg.Keys) == 0 && len(cfg.Join) > 0 && !cfg.AllowInsecure {
		return nil, &FieldError{Field: "Join", Err: errors.New("a cluster needs a key (Keys): without one anyone who reaches the gossip and NATS ports can rewrite the counts (AllowInsecure allows it for a throwaway local cluster)")}
	}
	switch cfg.Profile {
	case "", "wan", "lan", "local":
	default:
		return nil, fmt.Errorf("%w: gossip profile %q (want wan, lan or local)", ErrConfig, cfg.Profile)
	}
	if cfg.Cluster == "" {
		cfg.Cluster = "tally"
	}
	if err := ids.Valid(cfg.Cluster); err != nil || strings.ContainsAny(cfg.Cluster, ".") {
		return nil, fmt.Errorf("%w: cluster name %q: letters, digits, '_' and '-' only", ErrConfig, cfg.Cluster)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.PublishEvery, 100*time.Millisecond)
	def(&cfg.HeartbeatEvery, time.Second)
	def(&cfg.Retention, DefaultRetention)
	if cfg.Profile == "local" {
		def(&cfg.Reconnect, time.Second)
	}
	def(&cfg.Reconnect, 10*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	g := &Gossip{cfg: cfg, log: cfg.Logger.With("component", "gossip"), subject: "tally." + cfg.Cluster + ".state", keys: newKeyring(cfg.Keys),
		members: map[string]peer{}, failed: map[string]failedPeer{}}
	g.catchup = &catchUp{g: g, answering: make(chan struct{}, maxAnswering)}
	g.known.g = g
	g.mesh = newMesh(g)
	var err error
	if g.m, err = newMetrics(cfg.Registerer, g); err != nil {
		return nil, fmt.Errorf("gossip: metrics: %w", err)
	}
	g.mesh.m = g.m
	if g.single() && cfg.NATSURL == "" {
		if g.localPass, err = localPassword(); err != nil {
			return nil, err
		}
	}
	g.known.load()
	return g, nil
}

// newMesh makes g's NATS side, which reads g's configuration and
// membership and announces through it.
func newMesh(g *Gossip) *Mesh {
	return &Mesh{cfg: &g.cfg, self: &g.self, log: g.log, members: g.memberList, gossipAddr: g.GossipAddr,
		passwords: g.clientPasswords, closed: &g.closed, poke: make(chan struct{}, 1),
		announce: func() {
			if g.ml == nil {
				return
			}
			if err := g.ml.UpdateNode(5 * time.Second); err != nil {
				g.log.Warn("announcing new NATS ports", "err", err)
			}
		},
		onReconnect: func() {
			g.refreshNow.Store(true)
			g.budgetAsk.Store(true)
		},
	}
}

// alone reports whether no other member is alive.
func (g *Gossip) alone() bool {
	g.peersMu.Lock()
	defer g.peersMu.Unlock()
	for name := range g.members {
		if name != g.cfg.NodeName {
			return false
		}
	}
	return true
}

// maxStampAhead bounds how far ahead of this node's clock a gossiped
// definition or certificate may be stamped (the clock's own skew bound).
const maxStampAhead = 5 * time.Second

// single reports whether this node runs alone: no key and no permission
// to run a cluster without one. It then accepts no members.
func (g *Gossip) single() bool { return !g.keys.enabled() && !g.cfg.AllowInsecure }

// SetAddrs sets the HTTP and admin addresses announced to the others
// (Config.HTTPAddr and Config.AdminAddr; admin "": none), for callers that
// learn them after New (listeners on port 0). Call it before Start.
func (g *Gossip) SetAddrs(httpAddr, adminAddr string) {
	g.cfg.HTTPAddr, g.cfg.AdminAddr = httpAddr, adminAddr
}

// Start binds memberlist, joins the seeds, starts (or connects to) NATS and
// the publisher. It returns once the node is a member; NATS connects in
// the background and reconnects forever.
// It is long because it is the start order, one step after the other.
func (g *Gossip) Start() error {
	cfg := g.cfg
	g.self = meta{Region: cfg.Region, Replica: cfg.Replica, Role: cfg.Role, HTTP: cfg.HTTPAddr, HTTPS: cfg.HTTPS, Admin: cfg.AdminAddr, Proto: Protocol, Rel: release(cfg.Release)}
	if len(cfg.PublicKey) == ed25519.PublicKeySize {
		g.self.Pub = base64.StdEncoding.EncodeToString(cfg.PublicKey)
	}
	if g.single() {
		// A node without a key is a single node: no route or gateway
		// listener for a stranger to connect to.
		cfg.NATSClusterAddr, cfg.NATSGatewayAddr, cfg.NATSLeafAddr = "", "", ""
		g.cfg = cfg
	}
	if cfg.Role == RoleEdge {
		// An edge is a leaf of its region's full nodes: the route mesh
		// and the gateways hold full nodes only, however many edges come.
		cfg.NATSClusterAddr, cfg.NATSGatewayAddr, cfg.NATSLeafAddr = "", "", ""
		g.cfg = cfg
	}
	if cfg.NATSURL == "" {
		// Each address is tried here, so a port already taken is named by
		// its flag at once instead of the embedded server timing out.
		g.mesh.want = [4]string{cmp.Or(cfg.NATSAddr, DefaultNATSAddr), cfg.NATSClusterAddr, cfg.NATSGatewayAddr, cfg.NATSLeafAddr}
		var err error
		if cfg.NATSAddr, err = freePort(cmp.Or(cfg.NATSAddr, DefaultNATSAddr)); err != nil {
			return &FieldError{Field: "NATSAddr", Value: cfg.NATSAddr, Err: err}
		}
		if cfg.NATSClusterAddr != "" {
			if g.self.NATSCluster, err = freePort(cfg.NATSClusterAddr); err != nil {
				return &FieldError{Field: "NATSClusterAddr", Value: cfg.NATSClusterAddr, Err: err}
			}
		}
		if cfg.NATSGatewayAddr != "" {
			if g.self.NATSGateway, err = freePort(cfg.NATSGatewayAddr); err != nil {
				return &FieldError{Field: "NATSGatewayAddr", Value: cfg.NATSGatewayAddr, Err: err}
			}
		}
		if cfg.NATSLeafAddr != "" {
			if g.self.NATSLeaf, err = freePort(cfg.NATSLeafAddr); err != nil {
				return &FieldError{Field: "NATSLeafAddr", Value: cfg.NATSLeafAddr, Err: err}
			}
		}
		g.cfg = cfg
	}
	g.known.expect = g.known.expectsPeers()
	if err := g.startMemberlist(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	fail := func(err error) error {
		cancel()
		g.wg.Wait()
		g.ml.Shutdown()
		g.ml = nil // Close must not Leave a memberlist already shut down
		return err
	}
	if len(cfg.Join) > 0 {
		if _, err := g.ml.Join(cfg.Join); err != nil {
			// Not fatal: the seeds may start later. Keep trying.
			if !g.keyWatch.joinFailed(cfg.Join, err) {
				g.log.Warn("cannot join the seeds yet; retrying in the background", "seeds", cfg.Join, "err", err)
			}
			g.wg.Add(1)
			go g.rejoin(ctx)
		}
	}
	if kept := slices.DeleteFunc(g.known.keptAddrs(), func(a string) bool { return slices.Contains(cfg.Join, a) || a == g.GossipAddr() }); len(kept) > 0 {
		g.wg.Add(1)
		go g.known.rejoinKept(ctx, kept)
	}
	if other := g.conflict.Load(); other != nil {
		return fail(&FieldError{Field: "NodeName", Value: strconv.Quote(cfg.NodeName), Err: fmt.Errorf("already taken by the member at %s: give every node a unique name", *other)})
	}
	if err := g.mesh.start(g.subscribe); err != nil {
		return fail(err)
	}
	g.wg.Add(2)
	go g.publishLoop(ctx)
	go g.reconnectLoop(ctx)
	if cfg.Role == RoleFull {
		g.wg.Add(2)
		go g.catchup.loop(ctx)
		go stewardLoop(ctx, g)
	}
	if cfg.NATSURL == "" {
		g.wg.Go(func() { g.mesh.repairLoop(ctx) })
	}
	return nil
}

// rejoin retries the seeds with backoff until one answers.
func (g *Gossip) rejoin(ctx context.Context) {
	defer g.wg.Done()
	wait := 500 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		_, err := g.ml.Join(g.cfg.Join)
		if err == nil {
			g.log.Info("joined the cluster", "members", g.ml.NumMembers())
			return
		}
		if !g.keyWatch.joinFailed(g.cfg.Join, err) && wait >= 30*time.Second {
			g.log.Warn("still cannot join the seeds; retrying", "seeds", g.cfg.Join, "err", err) // every 30 s
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// Close leaves the cluster and stops every goroutine and connection. Only
// the first call does anything.
func (g *Gossip) Close() error {
	if !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	// A barrier: a memberlist answer that saw closed false has been added
	// to wg by the time this lock is free.
	g.userMu.Lock()
	//lint:ignore SA2001 the empty critical section is the barrier
	g.userMu.Unlock()
	if g.cancel != nil {
		g.cancel()
	}
	g.wg.Wait()
	// The loops are done: publish what changed since the last delta (the
	// final votes of a draining node) and wait for NATS to take it, so the
	// other regions have this node's last counts before it leaves.
	if g.pub.versions != nil && g.publishOnce() {
		g.mesh.flush(time.Second)
	}
	var err error
	if g.ml != nil {
		// The leave goes out with the next gossip round; a timeout means no
		// peer was reachable, which their failure detector covers.
		if lerr := g.ml.Leave(3 * time.Second); lerr != nil {
			g.log.Info("left the cluster without confirmation that the leave was sent", "err", lerr)
		}
		err = g.ml.Shutdown()
	}
	g.mesh.close()
	return err
}

// Mesh is the node's NATS side, whose connection the edge relay borrows.
func (g *Gossip) Mesh() *Mesh { return g.mesh }

// subscribe takes the cluster's subjects on a new connection: the state
// deltas; at a full node, the token budgets and the ballot catch-up.
func (g *Gossip) subscribe(nc *nats.Conn) error {
	if _, err := nc.Subscribe(g.subject, func(m *nats.Msg) { g.receive(pathNATS, m.Data) }); err != nil {
		return err
	}
	if g.cfg.Role != RoleFull {
		return nil
	}
	if _, err := nc.Subscribe(budgetSubject(g), func(m *nats.Msg) { g.receiveBudget(m.Data) }); err != nil {
		return err
	}
	if _, err := nc.Subscribe(pushSubject(g), func(m *nats.Msg) { servePush(g, m) }); err != nil {
		return err
	}
	if _, err := nc.Subscribe(g.catchup.subject(g.cfg.Replica), g.catchup.serve); err != nil {
		return err
	}
	// Any replica's subject: answered here only for a gone one (steward.go).
	_, err := nc.Subscribe(g.catchup.subject(">"), g.catchup.serveGone)
	return err
}

// splitHost returns the host of a host:port, or "" when there is none.
func splitHost(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return h
}
