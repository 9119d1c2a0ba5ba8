package node

import (
	"cmp"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"tally/admin"
	"tally/certify"
	"tally/fanout"
	"tally/gossip"
	"tally/hlc"
	"tally/ids"
	"tally/ingest"
	"tally/internal/backup"
	"tally/internal/buildinfo"
	"tally/internal/tlsconf"
	"tally/join"
	"tally/ledger"
	"tally/poll"
	"tally/qr"
	"tally/relay"
	"tally/session"
	"tally/state"
)

// Node is one running Tally node.
type Node struct {
	cfg         Config
	log         *slog.Logger
	replica     string
	adminToken  string   // the first admin token
	adminTokens []string // every admin token accepted (a rotation adds one before removing the old)
	peerTokens  []string // node-to-node credentials derived from the gossip keys; the first is sent
	keys        *keyBook // the keys of replicas it never met (peers.go)

	ledger   *ledger.Ledger
	clock    *hlc.Clock
	state    *state.State
	ingest   *ingest.Pipeline
	admin    *admin.Host
	fanout   *fanout.Server
	pages    *pages // the page, QR and join codes, CORS and CSP
	gossip   *gossip.Gossip
	certify  *certify.Certifier
	edge     *relay.Edge    // an edge's relay of votes to the full nodes; nil at a full node
	relayM   *relay.Metrics // the relay's, at either role
	reg      *prometheus.Registry
	m        nodeMetrics
	tls      *tlsconf.Identity // --tls-cert: HTTPS listeners, TLS between nodes; nil: plain
	listener net.Listener
	srv      *http.Server
	adminLn  net.Listener // --admin-addr; nil: admin endpoints on the public port
	adminSrv *http.Server
	debugLn  net.Listener // --debug-addr; nil: no profiles served
	debugSrv *http.Server
	ready    atomic.Bool    // replayed and serving: the API answers
	startAt  atomic.Int64   // when the start order was done, ready or not (Unix ns, the process clock): the catch-up wait runs from it
	caughtUp atomic.Bool    // the catch-up gate is open (catchup.go)
	draining atomic.Bool    // stopping: /readyz answers 503, the API still answers
	backup   *backup.Server // GET /v1/backup
	ckpt     *checkpoints   // the checkpoint file and the kept tallies
	copies   copies         // the two-copy rule: this node's buddy, and the copies it keeps (buddy.go)
	restore  restoring      // a replica restored from a backup, made whole from its copies before it turns ready (restore.go)
	life     runState       // Run and Close (run.go)
}

// Open prepares a node: it opens the data directory and the ledger, loads
// the poll definitions and binds the HTTP address. Run serves; Close
// stops it (or, never run, closes what Open opened).
// It is long because it is the start order, one step after the other,
// and a failure at any step closes what the steps before opened.
func Open(cfg Config) (n *Node, err error) {
	cfg.fillDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := prepareDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	tlsID, natsTLS, err := cfg.loadTLS(func(err error) {
		if err != nil {
			cfg.Logger.Error("TLS certificate not reloaded; serving the previous one", "err", err)
		} else {
			cfg.Logger.Info("TLS certificate reloaded", "cert", cfg.TLSCert)
		}
	})
	if err != nil {
		return nil, err
	}
	n = &Node{cfg: cfg, log: cfg.Logger, reg: cfg.Registry, tls: tlsID}
	opened := n // the return below sets n to nil
	defer func() {
		if err != nil {
			opened.closeStorage()
		}
	}()
	known := fileExists(cfg.DataDir, replicaIDFile) // the data dir of a replica that ran (or was restored), not a new one
	if n.replica, err = openReplica(n, known); err != nil {
		return nil, err
	}
	if n.adminTokens, err = loadAdminTokens(cfg); err != nil {
		return nil, err
	}
	n.adminToken = n.adminTokens[0]
	salt, _, err := readOrCreate(cfg.DataDir, ipSaltFile, func() (string, error) { return randomHex(32) })
	if err != nil {
		return nil, fmt.Errorf("node: ip salt: %w", err)
	}
	key, err := openState(n)
	if err != nil {
		return nil, err
	}
	signer, err := sessionSigner(cfg, known)
	if err != nil {
		return nil, err
	}
	datacenters, err := readDatacenters(cfg.DatacenterFile)
	if err != nil {
		return nil, err
	}
	if n.ingest, err = newIngest(n, key, signer, salt, datacenters); err != nil {
		return nil, err
	}
	n.ckpt = &checkpoints{dataDir: cfg.DataDir, every: cfg.CheckpointEvery, replica: n.replica, ledger: n.ledger,
		state: n.state, ingest: n.ingest, log: n.log, m: &n.m}
	var kept admin.Copies // nil, not a nil *buddy.Store: no copies kept
	if n.copies.store != nil {
		kept = n.copies.store
	}
	n.admin, err = admin.New(admin.Config{State: n.state, Clock: n.clock, Ledger: n.ledger, SigningKey: key, MaxBody: cfg.Limits.MaxBody, Now: cfg.Now,
		Fence: n.ingest.Fence, Copies: kept, Closed: closer(n)})
	if err != nil {
		return nil, err
	}
	keys, _ := cfg.gossipKeys() // checked above
	n.peerTokens = peerTokens(keys)
	n.keys = newKeyBook(n)
	peerToken := ""
	if len(n.peerTokens) > 0 {
		peerToken = n.peerTokens[0]
	}
	logGossipSecurity(cfg, keys)
	n.gossip, err = newGossip(n, keys, key, tlsID, natsTLS)
	if err == nil {
		err = n.gossip.CheckPorts() // a port taken is refused now, not after the banner
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, flagError(err))
	}
	if n.certify, err = newCertify(n, key, peerToken); err != nil {
		return nil, err
	}
	if n.relayM, err = relay.NewMetrics(n.reg); err != nil {
		return nil, err
	}
	if err := n.registerMetrics(n.reg); err != nil {
		return nil, fmt.Errorf("node: cannot register metrics: %w", err)
	}
	if n.fanout, err = newFanout(n); err != nil {
		return nil, err
	}
	if cfg.Demo && len(n.state.Defs.Polls()) == 0 {
		if err := createDemoPoll(n.clock, n.state); err != nil {
			return nil, err
		}
	}
	if err := n.listenAll(); err != nil {
		return nil, err
	}
	return n, nil
}

// openState opens n's clock, ledger and state (the definitions kept,
// this replica's signing key learnt) and what reads them directly: the
// page's codes and the backup. It returns the signing key.
func openState(n *Node) (ed25519.PrivateKey, error) {
	if err := n.openClock(); err != nil {
		return nil, err
	}
	if err := n.openLedger(); err != nil {
		return nil, err
	}
	var err error
	n.state, err = state.New(state.Config{
		Replica:  n.replica,
		Store:    n.ledger,
		MaxPolls: n.cfg.MaxPolls,
		Now:      n.cfg.Now,
		Logger:   n.cfg.Logger,
		HashKey:  ids.ClusterHashKey(n.cfg.Cluster),
	})
	if err != nil {
		return nil, err
	}
	n.pages = &pages{cfg: &n.cfg, state: n.state, qr: qr.New(), joins: join.New(n.state, n.cfg.Now)}
	n.backup = n.backupServer()
	key, err := signingKey(n.cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("node: signing key: %w", err)
	}
	if err := n.state.Defs.LearnKey(n.replica, key.Public().(ed25519.PublicKey)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	for id, why := range n.state.Defs.SetAside() {
		n.cfg.Logger.Warn("stored poll definition no longer valid; it is not served (its records stay in the ledger)", "poll", id, "err", why)
	}
	return key, nil
}

// loadAdminTokens returns the admin tokens: --admin-token's, else the
// data dir's (made on the first start).
func loadAdminTokens(cfg Config) ([]string, error) {
	if tokens := adminTokens(cfg.AdminToken); len(tokens) > 0 {
		return tokens, nil
	}
	token, _, err := readOrCreate(cfg.DataDir, adminTokenFile, func() (string, error) { return randomHex(16) })
	if err != nil {
		return nil, fmt.Errorf("node: admin token: %w", err)
	}
	return []string{token}, nil
}

// logGossipSecurity says, at start, what a node without a cluster key is.
func logGossipSecurity(cfg Config, keys [][]byte) {
	if len(keys) > 0 {
		return
	}
	if cfg.InsecureGossip {
		cfg.Logger.Warn("--insecure-gossip: gossip is neither encrypted nor authenticated; anyone who reaches its ports can rewrite the counts")
	} else {
		cfg.Logger.Info("no --gossip-key: a single node (it takes no members and opens no NATS route or gateway)")
	}
}

// newIngest makes the vote pipeline of n's ledger, state and clock.
func newIngest(n *Node, key ed25519.PrivateKey, signer *session.Signer, salt string, datacenters []netip.Prefix) (*ingest.Pipeline, error) {
	cfg := n.cfg
	return ingest.New(ingest.Config{
		Ledger:         n.ledger,
		State:          n.state,
		Clock:          n.clock,
		Names:          cfg.Names,
		Limits:         cfg.Limits,
		TrustFloor:     cfg.TrustFloor,
		IPSalt:         []byte(salt),
		TrustedProxies: cfg.TrustedProxies,
		IPv6Prefix:     cfg.IPv6Prefix,
		Registerer:     n.reg,
		Now:            cfg.Now,
		Datacenters:    datacenters,
		CatchingUp:     n.catchingUp,
		CopyReady:      n.copies.copyReady,
		SignReceipt:    receiptSigner(cfg.NoReceipts, key),
		Sessions: ingest.Sessions{
			Signer:          signer,
			Require:         cfg.RequireSession,
			PowBits:         max(cfg.PowBits, 0), // NoPuzzle: 0 bits
			TokensPerMinute: cfg.TokensPerMinute,
			Vouched:         cfg.VouchedTokens,
			QuizVouched:     cfg.QuizVouchedTokens,
			VouchPace:       cfg.VouchPace,
			Shared:          cfg.SharedNetworks,
			TTL:             cfg.SessionTTL,
		},
	})
}

// receiptSigner signs votes' receipts with the replica's key, unless
// --no-receipts.
func receiptSigner(off bool, key ed25519.PrivateKey) func([]byte) []byte {
	if off {
		return nil
	}
	return func(msg []byte) []byte { return ed25519.Sign(key, msg) }
}

// newGossip makes n's membership and NATS side.
func newGossip(n *Node, keys [][]byte, key ed25519.PrivateKey, tlsID *tlsconf.Identity, natsTLS *tls.Config) (*gossip.Gossip, error) {
	cfg := n.cfg
	return gossip.New(gossip.Config{
		NodeName:         cfg.NodeName,
		Region:           cfg.Region,
		Replica:          n.replica,
		Role:             cfg.Role,
		BindAddr:         cfg.GossipAddr,
		AdvertiseAddr:    cfg.GossipAdvertise,
		Join:             cfg.Join,
		ExpectMembers:    cfg.ExpectMembers,
		ExpectFull:       cfg.ExpectFull,
		Keys:             keys,
		AllowInsecure:    cfg.InsecureGossip,
		PublicKey:        key.Public().(ed25519.PublicKey),
		Profile:          cfg.GossipProfile,
		PushPull:         cfg.PushPull,
		WrapTransport:    cfg.WrapGossip,
		Cluster:          cfg.Cluster,
		Release:          buildinfo.Read().Version,
		HTTPS:            tlsID != nil,
		TLS:              natsMutual(tlsID),
		NATSCredsFile:    cfg.NATSCreds,
		NATSNKeyFile:     cfg.NATSNKey,
		NATSTLS:          natsTLS,
		NATSURL:          cfg.NATSURL,
		NATSAddr:         cfg.NATSAddr,
		NATSClusterAddr:  cfg.NATSClusterAddr,
		NATSGatewayAddr:  cfg.NATSGatewayAddr,
		NATSLeafAddr:     cfg.NATSLeafAddr,
		Retention:        cfg.Retention,
		State:            n.state,
		Clock:            n.clock,
		Registerer:       n.reg,
		Logger:           cfg.Logger,
		Now:              cfg.Now,
		Store:            n.ledger,
		Settle:           n.ingest.Settle,
		UnknownKey:       n.keys.unknown,
		CheckCertificate: func(c state.Certificate) error { return n.certify.Check(c) },
	})
}

// newCertify makes n's closer and certifier.
func newCertify(n *Node, key ed25519.PrivateKey, peerToken string) (*certify.Certifier, error) {
	cfg := n.cfg
	return certify.New(certify.Config{
		State:         n.state,
		Ledger:        n.ledger,
		Replica:       n.replica,
		Name:          cfg.NodeName,
		Full:          cfg.Role == gossip.RoleFull,
		Peers:         n.peers,
		Synced:        n.mayCertify,
		Fetch:         cfg.Fetch,
		PeerHeader:    PeerHeader,
		PeerToken:     peerToken,
		Client:        n.peerClient(),
		Sign:          func(b []byte) []byte { return ed25519.Sign(key, b) },
		Clock:         n.clock,
		TrustFloor:    cfg.TrustFloor,
		Settle:        cfg.CertifySettle,
		Prefetch:      cfg.CertifyPrefetch,
		TakeoverAfter: cfg.TakeoverAfter,
		Logger:        cfg.Logger,
		Now:           cfg.Now,
		Registerer:    n.reg,
		Fence:         n.ingest.Fence,
		Ballots:       heldCopies(n),
	})
}

// newFanout makes n's live streams; at an edge, the votes sent on them
// are relayed to a full node.
func newFanout(n *Node) (*fanout.Server, error) {
	cfg := n.cfg
	var voter fanout.Voter = n.ingest
	participant := func(token, userAgent, ip string) (string, bool, error) {
		voter, counted := n.ingest.Participant(token, userAgent, ip)
		return voter, counted, nil
	}
	if cfg.Role == gossip.RoleEdge {
		n.edge = relay.NewEdge(relay.EdgeConfig{
			Conn:       n.gossip.Mesh().Conn, // borrowed: the mesh owns it
			Cluster:    cfg.Cluster,
			FullNodes:  n.fullNodes,
			Seal:       n.gossip.SealRelay,
			Open:       n.gossip.OpenRelay,
			ClientIP:   func(r *http.Request) string { return ingest.ClientIP(r, cfg.TrustedProxies) },
			MaxBody:    cfg.Limits.MaxBody,
			CheckVotes: checkAtEdge(n.state, cfg.Now),
			Receipts:   receiptsEverywhere(n),
			Metrics:    n.relayM,
			Logger:     cfg.Logger,
			Now:        cfg.Now,
		})
		voter = edgeVoter{edgeVotes{n.m.edgeVotes}, n.edge} // its clients' answers counted (refusals.go)
		participant = n.edge.Participant                    // a full node checks the join's token
	}
	return fanout.New(fanout.Config{
		Source:          n.state,
		Voter:           voter,
		Region:          cfg.Region,
		Tick:            cfg.Tick,
		Origins:         browserOrigins(&n.cfg),
		Freshness:       n.freshness,
		MaxTick:         cfg.MaxTick,
		CPUBudget:       cfg.FanoutCPU,
		CPU:             processCPU,
		Wait:            schedWait(),
		Standings:       n.quizStandings,
		Participant:     participant,
		NameAllowed:     nameAllowed(cfg.Names),
		MaxViewers:      cfg.MaxViewers,
		MaxViewersPerIP: cfg.MaxViewersPerIP,
		ClientIP:        func(r *http.Request) string { return ingest.ClientIP(r, cfg.TrustedProxies) },
		AddrKey:         func(ip string) string { return ingest.AddressKey(ip, cmp.Or(cfg.IPv6Prefix, ingest.DefaultIPv6Prefix)) },
		Registerer:      n.reg,
		Now:             cfg.Now,
	})
}

// Addr returns the HTTP address the node listens on.
func (n *Node) Addr() string { return n.listener.Addr().String() }

// AdminAddr returns the address of the admin listener ("" without one).
func (n *Node) AdminAddr() string {
	if n.adminLn == nil {
		return ""
	}
	return n.adminLn.Addr().String()
}

// Replica returns the node's replica id.
func (n *Node) Replica() string { return n.replica }

// AdminToken returns the Bearer token of the admin endpoints.
func (n *Node) AdminToken() string { return n.adminToken }

// Ledger returns the node's ledger (for tests and tools in-process).
func (n *Node) Ledger() *ledger.Ledger { return n.ledger }

func (n *Node) closeStorage() error {
	if n.fanout != nil {
		n.fanout.Close()
	}
	var err error
	if n.ledger != nil {
		err = n.ledger.Close()
	}
	return errors.Join(err, n.copies.closeStore())
}

func (n *Node) banner() {
	host, port, _ := net.SplitHostPort(n.Addr())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	w := n.cfg.Stdout
	fmt.Fprintf(w, "tally node %s (region %s) listening on %s://%s\n", n.replica, n.cfg.Region, n.scheme(), n.Addr())
	fmt.Fprintf(w, "  page:        %s://%s/\n", n.scheme(), net.JoinHostPort(host, port))
	if n.edge == nil {
		fmt.Fprintf(w, "  acks:        %s\n", n.copies.says(n.cfg))
	}
	switch { // the token itself is never printed: logs and terminals are shared
	case n.cfg.AdminTokenFile != "":
		fmt.Fprintf(w, "  admin token: in %s\n", n.cfg.AdminTokenFile)
	case n.cfg.AdminToken == "":
		fmt.Fprintf(w, "  admin token: in %s   (cat it; it is not printed)\n", filepath.Join(n.cfg.DataDir, adminTokenFile))
	default:
		io.WriteString(w, "  admin token: as given by --admin-token / $TALLY_ADMIN_TOKEN\n")
	}
}

func (n *Node) openPolls() int {
	now := n.cfg.Now().UnixMilli()
	open := 0
	for _, p := range n.state.Defs.Polls() {
		if p.StatusAt(now, false) == poll.Open {
			open++
		}
	}
	return open
}

// createDemoPoll opens a poll for a first look, for a day.
func createDemoPoll(clock *hlc.Clock, st *state.State) error {
	ts, err := clock.Now()
	if err != nil {
		return err
	}
	day := 24 * 3600.0
	def, err := poll.Spec{
		ID: "demo", Question: "Which colour should the stage lights be tonight?",
		Options:   []poll.Option{{ID: "red", Label: "Red"}, {ID: "green", Label: "Green"}, {ID: "blue", Label: "Blue"}, {ID: "gold", Label: "Gold"}},
		DurationS: &day,
	}.Definition(ts.Wall)
	if err != nil {
		return err
	}
	_, err = st.Defs.PutPoll(def, ts)
	return err
}

// peers lists the live members for certification.
func (n *Node) peers() []certify.Peer {
	var out []certify.Peer
	for _, m := range n.gossip.Members() {
		out = append(out, certify.Peer{Name: m.Name, Replica: m.Replica, HTTPAddr: m.HTTPAddr, HTTPS: m.HTTPS, Full: m.Role == gossip.RoleFull})
	}
	return out
}

// GossipAddr returns the memberlist address the node announces (after Run
// started gossip).
func (n *Node) GossipAddr() string { return n.gossip.GossipAddr() }

// quizStandings is a quiz's ranking for the live streams (certify ranks;
// fanout shows).
func (n *Node) quizStandings(quizID string) fanout.Standings {
	rk, err := n.certify.Ranking(quizID)
	if err != nil {
		return fanout.Standings{}
	}
	return fanout.Standings{Top: rk.Top(10), Participants: rk.Participants(), Digest: rk.Digest, Final: rk.Final, Of: rk.Of}
}

// nameAllowed is fanout's vetting of a quiz join's display name, in its
// normal form: the node's name filter, as for answers (nil: every
// well-formed name).
func nameAllowed(f ingest.NameFilter) func(string) bool {
	if f == nil {
		return nil
	}
	return f.Allow
}

// openReplica reads (or, in a new data dir, makes) n's replica id. A full
// node of a cluster that starts on an empty data dir says so loudly: it
// may be the replacement of a lost node (known: the data dir had one).
func openReplica(n *Node, known bool) (string, error) {
	cfg := n.cfg
	id, err := replicaID(cfg.DataDir, cfg.Region)
	if err == nil && !known && len(cfg.Join) > 0 && cfg.Role == gossip.RoleFull {
		n.log.Warn("this node starts on an empty data dir, as a new replica: if it replaces a lost node of the same name, the members it joins log which replica it replaces; that one's votes are read from its buddy's copies and nobody waits for it (docs/operations.md, \"A lost node\")",
			"replica", id, "name", cfg.NodeName, "data_dir", cfg.DataDir)
	}
	return id, err
}
