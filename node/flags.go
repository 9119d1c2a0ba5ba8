package node

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path"
	"strings"
	"tally/gossip"
	"tally/ingest"
	"tally/internal/flagerr"
)

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
	fs.IntVar(&c.ExpectFull, "expect-full-nodes", c.ExpectFull, "how many full nodes the cluster has, edges apart (an autoscaler adds and removes those): fewer seen raises tally_gossip_full_members < tally_gossip_expected_full_members and the TallyMembersMissing alert, never /readyz, so a rolling upgrade keeps the others answering (0: not set)")
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
	fs.IntVar(&c.AckCopies, "ack-copies", c.AckCopies, "machines an acknowledged vote is on before its ack: 1, or 2 (this node's ledger and its buddy's copy); 0: 2 in a cluster, 1 for a single node")
	fs.BoolVar(&c.NoReceipts, "no-receipts", c.NoReceipts, "answer votes without a receipt: no voter can then check their vote in the certified result (docs/auditing.md, \"Receipts\"); saves the full node an Ed25519 signature, about 27 µs of CPU, a vote")
	fs.BoolVar(&c.AckCopiesDegrade, "ack-copies-degrade", c.AckCopiesDegrade, "with --ack-copies 2 and no buddy reachable, acknowledge votes with one copy (each counted and logged) instead of refusing them with 503 no_copy")
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
	fs.Func("origins", "comma-separated host patterns (path.Match, e.g. www.example.com,*.example.org) of other sites allowed to embed the poll page, read the public API (CORS), open live streams and write from their pages (a browser's vote, session or host write from any other site is refused 403)", func(s string) (err error) {
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

// parseOrigins reads --origins: comma-separated host patterns. A pattern
// that lets in every site, or every site under a top-level domain ("*",
// "*:*", "*.com"), is refused: the sites it names may make their
// visitors vote.
func parseOrigins(s string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(s, ",") {
		if o = strings.TrimSpace(o); o != "" {
			if _, err := path.Match(o, ""); err != nil || strings.ContainsAny(o, "/ ") {
				return nil, fmt.Errorf("%q is not a host pattern (like www.example.com or *.example.com)", o)
			}
			if tooWide(o) {
				return nil, fmt.Errorf("%q lets in every site (or a whole top-level domain): the sites --origins names may make their visitors vote; name them (like www.example.com or *.example.com)", o)
			}
			out = append(out, strings.ToLower(o))
		}
	}
	return out, nil
}

// tooWide reports whether an --origins pattern's host part, after its
// last wildcard, names less than a registered domain (two labels).
func tooWide(pattern string) bool {
	host := pattern
	if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.Trim(host[i+1:], "0123456789*") == "" {
		host = host[:i] // the port, or any port
	}
	i := strings.LastIndexAny(host, "*?[")
	if i < 0 {
		return false
	}
	labels := 0
	for _, l := range strings.Split(host[i+1:], ".") {
		if l != "" {
			labels++
		}
	}
	return labels < 2
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
