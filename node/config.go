package node

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
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
	ExpectFull      int      // full nodes the cluster should have (edges apart); fewer: a metric and an alert, not readiness. 0: not set
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
	AckCopies                                        int            // machines an acknowledged vote is on: 1 or 2; 0: 2 in a cluster, 1 alone
	AckCopiesDegrade                                 bool           // with no buddy, acknowledge with one copy (counted, logged) instead of 503 no_copy
	NoReceipts                                       bool           // answer votes without a signed receipt (about 27 µs of CPU a vote saved)
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
	// moderation service), given in their normal form (NFKC: styled
	// letters such as "𝐟𝐮𝐜𝐤" arrive as "fuck"); nil allows any well-formed
	// name. Not a flag: a program embedding the node supplies it.
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
	if err := c.checkAckCopies(); err != nil {
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

func (e *flagErr) Error() string { return e.msg }
func (e *flagErr) Unwrap() error { return e.fe }
