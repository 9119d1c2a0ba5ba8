package node

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"

	"tally/certify"
	"tally/fanout"
	"tally/gossip"
	"tally/ingest"
	"tally/internal/flagerr"
	"tally/session"
	"tally/state"
	"tally/trust"
)

// Config configures a node. DefaultConfig is the one source of the
// defaults (the flags start from it). A Config built by hand should start
// from DefaultConfig too: New fills in only the injected dependencies
// (Logger, Registry, Now, Stdout), Role, Region, the HTTP timeouts,
// Retention, SessionTTL, ForgetEvery and PowBits (NoPuzzle: none) when zero — from DefaultConfig.
// Everywhere else zero is a setting of its own, as its flag says:
// CheckpointEvery 0 checkpoints only at shutdown, CertifyPrefetch 0 copies
// nothing while polls run, Drain 0 stops at
// once, CatchUpWait 0 does not wait, TrustFloor 0 counts every vote, Demo
// false creates no demo poll. List flags (--join,
// --origins, --trusted-proxies, --shared-networks) are parsed when the
// flag is set.
type Config struct {
	// envErrs are TALLY_* values RegisterFlags could not parse; Validate
	// refuses to run with them, as a bad flag is refused.
	envErrs []error

	DataDir         string   // Pebble ledger, replica id, admin token
	HTTPAddr        string   // API, page and metrics
	Region          string   // region name, part of the replica id
	NodeName        string   // unique within the cluster
	AdminToken      string   // empty: generated and stored in DataDir
	GossipAddr      string   // memberlist bind address
	GossipAdvertise string   // memberlist address announced, when not the bind address
	Join            []string // memberlist seeds (host:port), parsed from --join
	ExpectMembers   int      // members (this node included) the cluster should have; fewer: not ready. 0: not set
	GossipKey       string   // memberlist encryption key (base64)
	// Files holding secrets, read at start (a file's content replaces the
	// flag's; giving both is an error): how operators keep secrets off
	// command lines and out of the environment of every child process.
	AdminTokenFile, GossipKeyFile, SessionSecretFile string
	InsecureGossip                                   bool           // allow --join without a key (throwaway local clusters only)
	GossipProfile                                    string         // memberlist timing: wan, lan or local
	PushPull                                         time.Duration  // anti-entropy interval; 0: the profile's
	Cluster                                          string         // cluster name: the NATS subject
	NATSURL                                          string         // external NATS; empty: embedded
	NATSAddr                                         string         // embedded NATS client listen address
	NATSClusterAddr                                  string         // embedded NATS route listener (nodes of one region); empty: none
	NATSGatewayAddr                                  string         // embedded NATS gateway listener (other regions); empty: none
	NATSLeafAddr                                     string         // embedded NATS leaf node listener (this region's edges); empty: none
	Retention                                        time.Duration  // closed polls stop being gossiped this long after close
	Role                                             string         // full or edge
	CertifySettle                                    time.Duration  // after close + grace, before certifying
	CertifyPrefetch                                  int            // records copied from every replica's chains while polls run; 0: none
	CheckpointEvery                                  time.Duration  // how often the vote state is checkpointed; 0: only at shutdown
	SessionSecret                                    string         // HMAC secret of voter tokens, shared by every region; empty: generated in the data dir
	RequireSession                                   bool           // refuse votes without a voter token
	PowBits                                          int            // proof-of-work difficulty before a token; 0: the default (16); NoPuzzle: none
	TokensPerMinute                                  int            // voter tokens per address per minute, across the cluster
	VouchedTokens, QuizVouchedTokens                 int            // tokens of one address that count (polls, quizzes), across the cluster
	VouchPace                                        float64        // vouched tokens a node hands one address a second
	CatchUpWait                                      time.Duration  // after a start, how long new votes wait for the other replicas' ballots
	SharedNetworks                                   []netip.Prefix // networks many people share (a venue): all vouched
	SessionTTL                                       time.Duration  // how long a voter token is good for
	DatacenterFile                                   string         // CIDRs of datacenters/proxies, one per line: votes from them score low
	TakeoverAfter                                    time.Duration  // how long each next node waits before taking certification over
	Tick                                             time.Duration  // fan-out tick
	MaxTick                                          time.Duration  // how far the tick stretches under load
	FanoutCPU                                        float64        // cores the node may use before the tick stretches; 0: never
	TrustedProxies                                   []netip.Prefix // peers whose X-Forwarded-For is believed
	Limits                                           ingest.Limits
	TrustFloor                                       float64
	Demo                                             bool // create a demo poll when there is none
	Origins                                          []string
	PublicURL                                        string // the voting page's address, for the presenter's QR code
	DebugAddr                                        string // serves net/http/pprof when set
	// AdminAddr, when set, serves /metrics, the full /v1/cluster and pprof
	// on their own listener; the public port then answers /metrics 404 and
	// /v1/cluster with the region freshness only.
	AdminAddr string
	// LogoHosts are the hosts besides this node's own site that the page's
	// ?logo= may show an image from (over https), parsed from --logo-hosts.
	LogoHosts []string
	// TLS files: with TLSCert and TLSKey the HTTP listeners serve HTTPS
	// only, certification fetches peers' ledgers over HTTPS, and the
	// embedded NATS server's routes and gateways run over mutual TLS.
	// TLSCA verifies the peers (empty: the system's roots).
	TLSCert, TLSKey, TLSCA string
	// An external NATS's credentials and TLS: a creds file or an nkey
	// seed file, a CA to verify it by, and a client certificate.
	NATSCreds, NATSNKey, NATSCA, NATSCert, NATSKey string
	MaxViewers                                     int
	MaxViewersPerIP                                int

	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	ShutdownTimeout   time.Duration
	// IPv6Prefix groups IPv6 clients for every per-address limit; 0: 64.
	IPv6Prefix int
	// MaxPolls bounds the polls the node holds; 0: state.DefaultMaxPolls.
	MaxPolls int
	// ForgetEvery is how often certified polls past retention are dropped
	// from memory; 0: 10s. Not a flag (tests shorten it).
	ForgetEvery time.Duration
	// Drain is how long a stopping node keeps serving with /readyz at 503
	// before it stops accepting; 0: none.
	Drain time.Duration

	// LogFormat (text or json) and LogLevel (debug, info, warn, error)
	// shape the logger NewLogger builds for the binary.
	LogFormat, LogLevel string

	// Names vets quiz participants' display names (a profanity list, a
	// moderation service); nil allows any well-formed name. Not a flag: a
	// program embedding the node supplies it.
	Names ingest.NameFilter

	// Injected for tests; nil means the real thing.
	Logger   *slog.Logger
	Registry *prometheus.Registry
	// Fetch replaces certification's HTTP fetch of a peer's ledger (tests
	// truncate or alter exports with it).
	Fetch certify.Fetcher
	// WrapGossip wraps memberlist's transport (tests partition with it).
	WrapGossip func(memberlist.NodeAwareTransport) memberlist.NodeAwareTransport
	Now        func() time.Time
	Stdout     io.Writer // where the start banner goes
}

// DefaultConfig returns the configuration of `go run ./cmd/node`.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		DataDir:           "./data",
		HTTPAddr:          ":8080",
		Region:            "local",
		NodeName:          host,
		GossipAddr:        gossip.DefaultBindAddr,
		GossipProfile:     "wan",
		Cluster:           "tally",
		NATSAddr:          gossip.DefaultNATSAddr,
		NATSClusterAddr:   ":6222",
		NATSGatewayAddr:   ":7222",
		NATSLeafAddr:      ":7422",
		Retention:         gossip.DefaultRetention,
		CertifySettle:     certify.DefaultSettle,
		CertifyPrefetch:   2_000_000,
		CheckpointEvery:   time.Minute,
		PowBits:           16,
		TrustFloor:        trust.DefaultFloor,
		TokensPerMinute:   ingest.DefaultTokensPerMinute,
		VouchedTokens:     ingest.DefaultVouched,
		QuizVouchedTokens: ingest.DefaultQuizVouched,
		VouchPace:         1,
		CatchUpWait:       10 * time.Second,
		SessionTTL:        ingest.DefaultSessionTTL,
		TakeoverAfter:     certify.DefaultTakeoverAfter,
		Role:              gossip.RoleFull,
		Tick:              fanout.DefaultTick,
		MaxTick:           fanout.DefaultMaxTick,
		FanoutCPU:         float64(runtime.NumCPU()) / 2,
		Limits:            ingest.DefaultLimits(),
		Demo:              true,
		MaxViewers:        fanout.DefaultMaxViewers,
		MaxViewersPerIP:   fanout.DefaultMaxViewersPerIP,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       120 * time.Second,
		ShutdownTimeout:   15 * time.Second,
		Drain:             5 * time.Second,
		ForgetEvery:       10 * time.Second,
		MaxPolls:          state.DefaultMaxPolls,
		IPv6Prefix:        ingest.DefaultIPv6Prefix,
		LogFormat:         "text",
		LogLevel:          "info",
	}
}

// ErrConfig is returned for a configuration the node cannot run with.
var ErrConfig = errors.New("bad configuration")

// ErrDamaged is returned when the data dir is damaged so that serving from
// it could lose acknowledged votes or reuse their sequence numbers: the
// node refuses to start. docs/operations.md says what to do.
var ErrDamaged = errors.New(`node: data dir damaged, refusing to start (see "A damaged ledger" in docs/operations.md)`)

// RegisterFlags adds every setting to fs, each defaulting to its
// TALLY_<NAME> environment variable when set, else to c's value. A value
// in the environment that does not parse makes Validate (and so New) fail,
// even when the flag is also given. It is long because it is one table, a
// line per flag, read top to bottom.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "Pebble data, replica id, admin token")
	fs.StringVar(&c.HTTPAddr, "http-addr", c.HTTPAddr, "HTTP listen address (API, WebSocket, page, metrics)")
	fs.StringVar(&c.Region, "region", c.Region, "region name shown to viewers and in replica ids")
	fs.StringVar(&c.NodeName, "node-name", c.NodeName, "unique node name within the cluster")
	fs.StringVar(&c.AdminToken, "admin-token", c.AdminToken, "Bearer token(s) for admin endpoints, comma-separated during a rotation (prefer --admin-token-file or $TALLY_ADMIN_TOKEN: a flag shows in ps; default: generated and stored in the data dir, never printed)")
	fs.StringVar(&c.GossipAddr, "gossip-addr", c.GossipAddr, "memberlist bind address (host:port)")
	fs.StringVar(&c.GossipAdvertise, "gossip-advertise", c.GossipAdvertise, "memberlist address announced to the others (host:port), when not the bind address (NAT, containers)")
	fs.IntVar(&c.ExpectMembers, "expect-members", c.ExpectMembers, "how many members (full nodes and edges, this node included) the cluster has: while fewer are seen /readyz answers 503 and tally_gossip_members < tally_gossip_expected_members raises an alert (0: not set)")
	fs.Func("join", "comma-separated memberlist seeds (host:port) of any region", func(s string) (err error) {
		c.Join, err = parseSeeds(s)
		return err
	})
	fs.StringVar(&c.GossipKey, "gossip-key", c.GossipKey, "base64 cluster key of 16, 24 or 32 bytes: encrypts memberlist and authenticates every gossip message (prefer $TALLY_GOSSIP_KEY: a flag shows in ps). Without it the node is a single node: it takes no members and opens no NATS route or gateway. Comma-separated keys during a rotation: the first seals, all verify")
	fs.StringVar(&c.AdminTokenFile, "admin-token-file", c.AdminTokenFile, "file holding the admin token(s), one per line or comma-separated: every one is accepted, so a new token can be added before the old one is removed")
	fs.StringVar(&c.GossipKeyFile, "gossip-key-file", c.GossipKeyFile, "file holding the cluster key(s), as --gossip-key")
	fs.StringVar(&c.SessionSecretFile, "session-secret-file", c.SessionSecretFile, "file holding the session secret, as --session-secret")
	fs.BoolVar(&c.InsecureGossip, "insecure-gossip", c.InsecureGossip, "allow --join without --gossip-key: anyone who reaches the gossip or NATS ports can then rewrite the counts; for a throwaway cluster on one machine only")
	fs.StringVar(&c.GossipProfile, "gossip-profile", c.GossipProfile, "memberlist timing: wan, lan or local")
	fs.DurationVar(&c.PushPull, "push-pull-interval", c.PushPull, "full-state anti-entropy interval (0: the profile's; wan 60s, lan 30s, local 15s)")
	fs.StringVar(&c.Cluster, "cluster", c.Cluster, "cluster name; nodes publish on the NATS subject tally.<cluster>.state")
	fs.StringVar(&c.NATSURL, "nats-url", c.NATSURL, "external NATS to use; empty: run an embedded NATS server")
	fs.StringVar(&c.NATSCreds, "nats-creds", c.NATSCreds, "external NATS: credentials file (JWT and nkey seed); a user and password go in --nats-url (better $TALLY_NATS_URL: a flag shows in ps)")
	fs.StringVar(&c.NATSNKey, "nats-nkey", c.NATSNKey, "external NATS: file holding an nkey seed (SU…)")
	fs.StringVar(&c.NATSCA, "nats-ca", c.NATSCA, "external NATS: CA certificate(s) that verify the server (PEM; empty: the system's roots when the URL says tls://)")
	fs.StringVar(&c.NATSCert, "nats-cert", c.NATSCert, "external NATS: client certificate (PEM), with --nats-key, when the server asks for one")
	fs.StringVar(&c.NATSKey, "nats-key", c.NATSKey, "external NATS: the client certificate's private key (PEM)")
	fs.StringVar(&c.NATSAddr, "nats-addr", c.NATSAddr, "embedded NATS client listen address")
	fs.StringVar(&c.NATSClusterAddr, "nats-cluster-addr", c.NATSClusterAddr, "embedded NATS route listener for the nodes of this region (empty: none)")
	fs.StringVar(&c.NATSGatewayAddr, "nats-gateway-addr", c.NATSGatewayAddr, "embedded NATS gateway listener for the other regions (empty: none)")
	fs.StringVar(&c.NATSLeafAddr, "nats-leaf-addr", c.NATSLeafAddr, "embedded NATS leaf node listener for this region's edges (empty: none); an edge opens no route, gateway or leaf listener and connects to its region's full nodes as a leaf node")
	fs.DurationVar(&c.Retention, "retention", c.Retention, "how long after close (plus grace) a poll's state is still gossiped")
	fs.StringVar(&c.SessionSecret, "session-secret", c.SessionSecret, "secret(s) (16+ bytes each, comma-separated during a rotation: the first signs, all verify) signing voter tokens and puzzles; every region must share them (default: generated in the data dir, tokens then work only at this node)")
	fs.BoolVar(&c.RequireSession, "require-session", c.RequireSession, "refuse votes without a voter token from POST /v1/session (production); off: a vote's own voter id is used")
	fs.Var((*powBitsFlag)(&c.PowBits), "pow-bits", "proof-of-work difficulty (leading zero bits) before a voter token is issued; rises for an address asking for many; 0: none")
	fs.StringVar(&c.DatacenterFile, "datacenter-ranges", c.DatacenterFile, "file of datacenter/proxy CIDRs, one per line (see deploy/datacenter-ranges.example); votes from them get a low trust score")
	fs.IntVar(&c.TokensPerMinute, "tokens-per-minute", c.TokensPerMinute, "voter tokens one client address (an IPv4 address; an IPv6 /64, and its whole /48) may obtain per minute across the whole cluster; past it 429")
	fs.IntVar(&c.VouchedTokens, "vouched-tokens", c.VouchedTokens, "of one address's tokens alive at once (one --session-ttl), how many count across the whole cluster; later ones still vote, shadowed")
	fs.IntVar(&c.QuizVouchedTokens, "quiz-vouched-tokens", c.QuizVouchedTokens, "the same for quiz answers: how many participants of one address may rank")
	fs.DurationVar(&c.CatchUpWait, "catch-up-wait", c.CatchUpWait, "after a start, how long new votes wait (503, Retry-After 1; /readyz 503) until this node holds the other replicas' ballots, so a retry of a key taken elsewhere is not answered as new (0: no wait)")
	fs.Float64Var(&c.VouchPace, "vouch-pace", c.VouchPace, "vouched tokens a node hands one address per second (later asks: 429, Retry-After 1), so regions asked at once cannot all hand out the same ones; 0: no pace")
	fs.Func("shared-networks", "comma-separated CIDRs many honest people share (a venue's Wi-Fi, a known carrier NAT): their tokens all count, and each address may obtain 50 times --tokens-per-minute", cidrFlag(&c.SharedNetworks))
	fs.DurationVar(&c.SessionTTL, "session-ttl", c.SessionTTL, "how long a voter token is good for (1m-24h): a broadcast's length, so tokens cannot be stockpiled long before")
	fs.DurationVar(&c.CheckpointEvery, "checkpoint-every", c.CheckpointEvery, "how often to checkpoint the vote state so a restart replays only the ledger tail (0: only at shutdown)")
	fs.IntVar(&c.CertifyPrefetch, "certify-prefetch", c.CertifyPrefetch, "records a full node may hold copied from every region's ledgers while polls run, and merged as they arrive (about 450 bytes of heap each: the record, 330, and its share of the merge, 117), so that certification at close reads only the last ones; 0: none, every ledger is read whole at close")
	fs.DurationVar(&c.CertifySettle, "certify-settle", c.CertifySettle, "after a poll's close plus grace, how long to wait for the last record counts to spread before certifying")
	fs.DurationVar(&c.TakeoverAfter, "certify-takeover", c.TakeoverAfter, "how long each next node in a poll's coordinator order waits before taking certification over")
	fs.StringVar(&c.Role, "role", c.Role, "full (ledgers votes and serves viewers) or edge (serves viewers and relays their votes to the full nodes, which ledger them)")
	fs.DurationVar(&c.Tick, "tick", c.Tick, "fan-out tick: how often viewers get the changed tally")
	fs.DurationVar(&c.MaxTick, "max-tick", c.MaxTick, "the longest the fan-out tick stretches to while the node's CPU use is over --fanout-cpu or its goroutines wait over 10 ms for a core (at most 2s)")
	fs.Float64Var(&c.FanoutCPU, "fanout-cpu", c.FanoutCPU, "cores the node may use before the fan-out tick stretches toward --max-tick (default half the cores); it also stretches while the node's goroutines wait over 10 ms for a core; 0: the tick never stretches")
	fs.Func("trusted-proxies", "comma-separated CIDRs whose X-Forwarded-For is believed for the client IP", cidrFlag(&c.TrustedProxies))
	fs.Float64Var(&c.Limits.IPRate, "rate-ip", c.Limits.IPRate, "votes per second per client IP (0: unlimited)")
	fs.IntVar(&c.Limits.IPBurst, "rate-ip-burst", c.Limits.IPBurst, "burst of votes per client IP")
	fs.Float64Var(&c.Limits.VoterRate, "rate-voter", c.Limits.VoterRate, "votes per second per voter id (0: unlimited)")
	fs.IntVar(&c.Limits.VoterBurst, "rate-voter-burst", c.Limits.VoterBurst, "burst of votes per voter id")
	fs.Int64Var(&c.Limits.MaxBody, "max-body", c.Limits.MaxBody, "largest request body in bytes")
	fs.Float64Var(&c.TrustFloor, "trust-floor", c.TrustFloor, "votes whose trust score (0-1, from their client's behaviour) is lower are ledgered and acknowledged but not counted; 0: count all")
	fs.BoolVar(&c.Demo, "demo", c.Demo, "create a demo poll when there is none")
	fs.Func("origins", "comma-separated host patterns (path.Match, e.g. www.example.com,*.example.org) of other sites allowed to embed the poll page, read the public API (CORS) and open live streams", func(s string) (err error) {
		c.Origins, err = parseOrigins(s)
		return err
	})
	fs.Func("logo-hosts", "comma-separated host names (cdn.example.com) besides this node's own site that the views' ?logo= may show an image from, over https; every page's Content-Security-Policy img-src lists them, so a logo from anywhere else is never fetched", func(s string) error {
		hosts, err := parseLogoHosts(s)
		c.LogoHosts = hosts
		return err
	})
	fs.Func("public-url", "the address viewers reach the page at (https://vote.example.com), for the presenter's QR code; default: the address the presenter's browser used", func(s string) (err error) {
		c.PublicURL, err = parsePublicURL(s)
		return err
	})
	fs.StringVar(&c.AdminAddr, "admin-addr", c.AdminAddr, "serve /metrics, the full /v1/cluster (members, addresses, NATS) and pprof here instead of on the public port (set it in production, on a private address); empty: on the public port")
	fs.StringVar(&c.TLSCert, "tls-cert", c.TLSCert, "this node's certificate chain (PEM): HTTP listeners serve HTTPS only, peers are called over HTTPS, embedded NATS routes and gateways use mutual TLS; reloaded when the file changes")
	fs.StringVar(&c.TLSKey, "tls-key", c.TLSKey, "the private key of --tls-cert (PEM)")
	fs.StringVar(&c.TLSCA, "tls-ca", c.TLSCA, "CA certificate(s) (PEM) that verify the other nodes' certificates; empty: the system's roots")
	fs.StringVar(&c.DebugAddr, "debug-addr", c.DebugAddr, "serve Go's pprof profiles on this address (keep it on loopback); empty: off")
	fs.IntVar(&c.IPv6Prefix, "ipv6-prefix", c.IPv6Prefix, "IPv6 clients in one network of this many bits count as one address for every per-address limit (rates, voter tokens, viewers); 128: each address apart")
	fs.IntVar(&c.MaxPolls, "max-polls", c.MaxPolls, "polls this node holds at most (open, closed, and kept until certified plus --retention); creating more answers 409 too_many_polls")
	fs.IntVar(&c.MaxViewers, "max-viewers", c.MaxViewers, "live viewers this node serves at most")
	fs.IntVar(&c.MaxViewersPerIP, "max-viewers-per-ip", c.MaxViewersPerIP, "live viewers per client IP")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", c.ReadHeaderTimeout, "cut off clients that send headers slower than this")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", c.ReadTimeout, "cut off clients that send a request slower than this")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", c.WriteTimeout, "longest time to write a response")
	fs.DurationVar(&c.Drain, "drain", c.Drain, "on SIGTERM/SIGINT, how long /readyz answers 503 while the node keeps serving, before it stops accepting (0: stop at once)")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "log lines as text (logfmt) or json, on standard error")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "least severe log level written: debug, info, warn or error")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "how long a graceful shutdown waits for in-flight requests")
	c.fromEnv(fs)
}

// NoPuzzle is Config.PowBits for no proof-of-work puzzle (--pow-bits 0):
// a Config's zero PowBits is the default difficulty, so a Config built by
// hand never runs without the puzzle unasked.
const NoPuzzle = -1

// powBitsFlag is --pow-bits: 0 on the command line is NoPuzzle.
type powBitsFlag int

func (f *powBitsFlag) String() string {
	if f == nil || *f == NoPuzzle {
		return "0"
	}
	return strconv.Itoa(int(*f))
}

func (f *powBitsFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return err
	}
	if n == 0 {
		n = NoPuzzle
	}
	*f = powBitsFlag(n)
	return nil
}

// fromEnv sets each flag of fs from its TALLY_<NAME> variable, when set,
// and names the variable in the flag's usage.
func (c *Config) fromEnv(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		env := "TALLY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if err := fs.Set(f.Name, v); err != nil {
				c.envErrs = append(c.envErrs, fmt.Errorf("%w: $%s=%q (--%s): %v", ErrConfig, env, v, f.Name, flagerr.Explain(f, err)))
			}
		}
		f.Usage += fmt.Sprintf(" [$%s]", env)
	})
}

// parseSeeds reads --join: comma-separated host:port seeds.
func parseSeeds(s string) ([]string, error) {
	var out []string
	for _, seed := range strings.Split(s, ",") {
		if seed = strings.TrimSpace(seed); seed == "" {
			continue
		}
		if host, port, err := net.SplitHostPort(seed); err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("%q is not host:port (like eu-1.example.net:7946)", seed)
		}
		out = append(out, seed)
	}
	return out, nil
}

// parseOrigins reads --origins: comma-separated host patterns.
func parseOrigins(s string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(s, ",") {
		if o = strings.TrimSpace(o); o != "" {
			if _, err := path.Match(o, ""); err != nil || strings.ContainsAny(o, "/ ") {
				return nil, fmt.Errorf("%q is not a host pattern (like www.example.com or *.example.com)", o)
			}
			out = append(out, strings.ToLower(o))
		}
	}
	return out, nil
}

// parsePublicURL reads --public-url: an http(s) address, no query or
// fragment, without a trailing slash.
func parsePublicURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q is not an http(s) address like https://vote.example.com", s)
	}
	return strings.TrimRight(s, "/"), nil
}

// Validate refuses settings the node cannot run with.
func (c *Config) Validate() error {
	if len(c.envErrs) > 0 {
		return c.envErrs[0]
	}
	if err := c.readSecretFiles(); err != nil {
		return err
	}
	if _, err := c.NewLogger(io.Discard); err != nil {
		return err
	}
	if err := gossip.CheckRole(c.Role); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, flagError(err))
	}
	if c.Role == gossip.RoleEdge && len(c.Join) == 0 {
		return fmt.Errorf("%w: --role edge serves gossiped state and needs --join", ErrConfig)
	}
	if c.SessionTTL != 0 && (c.SessionTTL < time.Minute || c.SessionTTL > 24*time.Hour) {
		return fmt.Errorf("%w: --session-ttl %v: want 1m-24h", ErrConfig, c.SessionTTL)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"tokens-per-minute", c.TokensPerMinute}, {"vouched-tokens", c.VouchedTokens}, {"quiz-vouched-tokens", c.QuizVouchedTokens}} {
		if f.v < 1 || f.v > 1_000_000 {
			return fmt.Errorf("%w: --%s %d: want 1-1000000", ErrConfig, f.name, f.v)
		}
	}
	if c.CertifyPrefetch < 0 || c.CertifyPrefetch > 100_000_000 {
		return fmt.Errorf("%w: --certify-prefetch %d: want 0-100000000 records (0: none; each about 450 bytes of heap)", ErrConfig, c.CertifyPrefetch)
	}
	if (c.PowBits < 0 && c.PowBits != NoPuzzle) || c.PowBits > session.MaxBasePowBits {
		return fmt.Errorf("%w: --pow-bits %d: want 0-%d (0: no puzzle; each bit doubles a phone's work)", ErrConfig, c.PowBits, session.MaxBasePowBits)
	}
	if c.MaxTick < c.Tick || c.MaxTick > 2*time.Second {
		return fmt.Errorf("%w: --max-tick %v: want from --tick (%v) to 2s (a viewer is within 2 s of the tally)", ErrConfig, c.MaxTick, c.Tick)
	}
	if !(c.FanoutCPU >= 0 && c.FanoutCPU <= 1024) { // NaN fails both
		return fmt.Errorf("%w: --fanout-cpu %v: want 0-1024 cores (0: the tick never stretches)", ErrConfig, c.FanoutCPU)
	}
	if c.CatchUpWait < 0 || c.CatchUpWait > 10*time.Minute {
		return fmt.Errorf("%w: --catch-up-wait %v: want 0-10m", ErrConfig, c.CatchUpWait)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"rate-ip", c.Limits.IPRate}, {"rate-voter", c.Limits.VoterRate}} {
		if !(f.v >= 0 && f.v <= 1e9) { // NaN and ±Inf too
			return fmt.Errorf("%w: --%s %v: want 0-1000000000 votes a second (0: unlimited)", ErrConfig, f.name, f.v)
		}
	}
	if c.Limits.IPBurst < 0 || c.Limits.VoterBurst < 0 {
		return fmt.Errorf("%w: --rate-ip-burst %d, --rate-voter-burst %d: want 0 or more", ErrConfig, c.Limits.IPBurst, c.Limits.VoterBurst)
	}
	if !(c.TrustFloor >= 0 && c.TrustFloor <= 1) {
		return fmt.Errorf("%w: --trust-floor %v: want 0-1 (trust scores are in [0, 1]; 0 counts every vote)", ErrConfig, c.TrustFloor)
	}
	if !(c.VouchPace >= 0 && c.VouchPace <= 1_000_000) { // NaN too
		return fmt.Errorf("%w: --vouch-pace %v: want 0-1000000 tokens a second", ErrConfig, c.VouchPace)
	}
	if c.IPv6Prefix < 0 || c.IPv6Prefix > 128 {
		return fmt.Errorf("%w: --ipv6-prefix %d: want 0-128", ErrConfig, c.IPv6Prefix)
	}
	if c.DataDir == "" || c.HTTPAddr == "" {
		return fmt.Errorf("%w: --data-dir and --http-addr are required", ErrConfig)
	}
	if _, err := c.gossipKeys(); err != nil {
		return err
	}
	hosts, err := parseLogoHosts(strings.Join(c.LogoHosts, ",")) // a Config built by hand too
	if err != nil {
		return fmt.Errorf("%w: --logo-hosts: %v", ErrConfig, err)
	}
	c.LogoHosts = hosts
	return nil
}

// NewLogger builds the logger --log-format and --log-level describe,
// writing to w. An empty format or level means text and info.
func (c *Config) NewLogger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if c.LogLevel != "" {
		if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
			return nil, fmt.Errorf("%w: --log-level %q: want debug, info, warn or error", ErrConfig, c.LogLevel)
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.LogFormat {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		// Durations as "1.5s", not bare nanoseconds ("took":0 said nothing).
		opts.ReplaceAttr = func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("%w: --log-format %q: want text or json", ErrConfig, c.LogFormat)
}

// gossipKeys decodes --gossip-key: comma-separated base64 keys, the first
// the primary.
func (c *Config) gossipKeys() ([][]byte, error) {
	var keys [][]byte
	for i, s := range strings.Split(c.GossipKey, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		key, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%w: --gossip-key %d is not base64: %v", ErrConfig, i+1, err)
		}
		keys = append(keys, key)
	}
	if err := gossip.CheckKeys(keys); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, flagError(err))
	}
	return keys, nil
}

// readSecretFiles replaces the secrets given by file with the files'
// contents. A secret given both ways is an error, not a silent choice.
func (c *Config) readSecretFiles() error {
	for _, f := range []struct {
		flag, path string
		value      *string
		list       bool // one per line or comma-separated
	}{
		{"--admin-token", c.AdminTokenFile, &c.AdminToken, true},
		{"--gossip-key", c.GossipKeyFile, &c.GossipKey, true},
		{"--session-secret", c.SessionSecretFile, &c.SessionSecret, true},
	} {
		if f.path == "" {
			continue
		}
		if *f.value != "" {
			return fmt.Errorf("%w: %s and %s-file are both given; keep one", ErrConfig, f.flag, f.flag)
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return fmt.Errorf("%w: %s-file: %v", ErrConfig, f.flag, err)
		}
		v := strings.TrimSpace(string(b))
		if f.list { // one per line or comma-separated; a secret may hold spaces
			var items []string
			for _, it := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
				if it = strings.TrimSpace(it); it != "" {
					items = append(items, it)
				}
			}
			v = strings.Join(items, ",")
		}
		if v == "" {
			return fmt.Errorf("%w: %s-file %s is empty", ErrConfig, f.flag, f.path)
		}
		*f.value = v
	}
	return nil
}

// adminTokens splits the admin token setting: every one is accepted.
func adminTokens(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// gossipFlags names, by gossip.Config field, the flag that sets it.
var gossipFlags = map[string]string{
	"BindAddr": "--gossip-addr", "Join": "--join", "NodeName": "--node-name",
	"NATSAddr": "--nats-addr", "NATSClusterAddr": "--nats-cluster-addr", "NATSGatewayAddr": "--nats-gateway-addr",
	"NATSLeafAddr":  "--nats-leaf-addr",
	"NATSCredsFile": "--nats-creds", "NATSNKeyFile": "--nats-nkey",
	"Role": "--role", "Keys": "--gossip-key",
}

// gossipHints say, by field, what to do in the operator's terms.
var gossipHints = map[string]string{
	"Join": "--join needs --gossip-key (or --gossip-key-file): without a key anyone who reaches the gossip and NATS ports can rewrite the counts (--insecure-gossip allows it for a throwaway local cluster)",
}

// flagError says a gossip.FieldError in flags: "--gossip-addr :7946: …".
// Other errors pass through unchanged.
func flagError(err error) error {
	fe, ok := errors.AsType[*gossip.FieldError](err)
	if !ok {
		return err
	}
	flag, ok := gossipFlags[fe.Field]
	if !ok {
		return err
	}
	switch hint := gossipHints[fe.Field]; {
	case hint != "":
		return &flagErr{hint, fe}
	case errors.Is(fe.Err, gossip.ErrTwoNATSCredentials):
		return &flagErr{"give --nats-creds or --nats-nkey, not both", fe}
	case fe.Value == "":
		return &flagErr{fmt.Sprintf("%s: %v", flag, fe.Err), fe}
	}
	return &flagErr{fmt.Sprintf("%s %s: %v", flag, fe.Value, fe.Err), fe}
}

// flagErr is a library's field error said in flags; it wraps the field
// error (and so its package's ErrConfig and cause).
type flagErr struct {
	msg string
	fe  *gossip.FieldError
}

func (e *flagErr) Error() string { return e.msg }
func (e *flagErr) Unwrap() error { return e.fe }

// cidrFlag parses a flag of comma-separated CIDRs (or single addresses)
// into *dst.
func cidrFlag(dst *[]netip.Prefix) func(string) error {
	return func(s string) error {
		p, err := ingest.ParseCIDRs(s)
		if err != nil {
			return err
		}
		*dst = p
		return nil
	}
}
