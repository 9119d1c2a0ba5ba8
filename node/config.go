package node

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tally/ingest"
)

// Config configures a node. DefaultConfig gives the defaults; a zero field
// of a Config built by hand also means its default where one exists.
type Config struct {
	DataDir         string        // Pebble ledger, replica id, admin token
	HTTPAddr        string        // API, page and metrics
	Region          string        // region name, part of the replica id
	NodeName        string        // unique within the cluster
	AdminToken      string        // empty: generated and stored in DataDir
	GossipAddr      string        // memberlist bind address (multi-region issue)
	Join            string        // memberlist seeds
	GossipKey       string        // memberlist encryption key
	NATSURL         string        // external NATS; empty: embedded
	NATSAddr        string        // embedded NATS listen address
	Role            string        // full or edge
	Tick            time.Duration // fan-out tick
	TrustedProxies  string        // CIDRs whose X-Forwarded-For is believed
	Limits          ingest.Limits
	TrustFloor      float64
	Demo            bool // create a demo poll when there is none
	Origins         []string
	DebugAddr       string // serves net/http/pprof when set
	MaxViewers      int
	MaxViewersPerIP int

	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	ShutdownTimeout   time.Duration

	// Injected for tests; nil means the real thing.
	Logger   *slog.Logger
	Registry *prometheus.Registry
	Now      func() time.Time
	Stdout   io.Writer // where the start banner goes
}

// DefaultConfig returns the configuration of `go run ./cmd/node`.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		DataDir:           "./data",
		HTTPAddr:          ":8080",
		Region:            "local",
		NodeName:          host,
		GossipAddr:        ":7946",
		NATSAddr:          "127.0.0.1:4222",
		Role:              "full",
		Tick:              250 * time.Millisecond,
		Limits:            ingest.DefaultLimits(),
		Demo:              true,
		MaxViewers:        19_000,
		MaxViewersPerIP:   200,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       120 * time.Second,
		ShutdownTimeout:   15 * time.Second,
	}
}

// ErrConfig is returned for a configuration the node cannot run with.
var ErrConfig = errors.New("node: bad configuration")

// RegisterFlags adds every setting to fs, each defaulting to its
// TALLY_<NAME> environment variable when set, else to c's value.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "Pebble data, replica id, admin token")
	fs.StringVar(&c.HTTPAddr, "http-addr", c.HTTPAddr, "HTTP listen address (API, WebSocket, page, metrics)")
	fs.StringVar(&c.Region, "region", c.Region, "region name shown to viewers and in replica ids")
	fs.StringVar(&c.NodeName, "node-name", c.NodeName, "unique node name within the cluster")
	fs.StringVar(&c.AdminToken, "admin-token", c.AdminToken, "Bearer token for admin endpoints (default: generated, stored in the data dir, printed)")
	fs.StringVar(&c.GossipAddr, "gossip-addr", c.GossipAddr, "memberlist bind address (host:port); multi-region gossip is not built yet")
	fs.StringVar(&c.Join, "join", c.Join, "comma-separated memberlist seeds; multi-region gossip is not built yet")
	fs.StringVar(&c.GossipKey, "gossip-key", c.GossipKey, "base64 memberlist encryption key; multi-region gossip is not built yet")
	fs.StringVar(&c.NATSURL, "nats-url", c.NATSURL, "external NATS to use; multi-region gossip is not built yet")
	fs.StringVar(&c.NATSAddr, "nats-addr", c.NATSAddr, "embedded NATS listen address; multi-region gossip is not built yet")
	fs.StringVar(&c.Role, "role", c.Role, "full (ingest and fan-out); edge is not built yet")
	fs.DurationVar(&c.Tick, "tick", c.Tick, "fan-out tick: how often viewers get the changed tally")
	fs.StringVar(&c.TrustedProxies, "trusted-proxies", c.TrustedProxies, "comma-separated CIDRs whose X-Forwarded-For is believed for the client IP")
	fs.Float64Var(&c.Limits.IPRate, "rate-ip", c.Limits.IPRate, "votes per second per client IP (0: unlimited)")
	fs.IntVar(&c.Limits.IPBurst, "rate-ip-burst", c.Limits.IPBurst, "burst of votes per client IP")
	fs.Float64Var(&c.Limits.VoterRate, "rate-voter", c.Limits.VoterRate, "votes per second per voter id (0: unlimited)")
	fs.IntVar(&c.Limits.VoterBurst, "rate-voter-burst", c.Limits.VoterBurst, "burst of votes per voter id")
	fs.Int64Var(&c.Limits.MaxBody, "max-body", c.Limits.MaxBody, "largest request body in bytes")
	fs.IntVar(&c.Limits.MaxAcks, "max-acks", c.Limits.MaxAcks, "idempotency keys remembered in memory per poll (beyond: ledger lookups)")
	fs.Float64Var(&c.TrustFloor, "trust-floor", c.TrustFloor, "votes with a lower trust score are ledgered but not counted")
	fs.BoolVar(&c.Demo, "demo", c.Demo, "create a demo poll when there is none")
	fs.Func("origins", "comma-separated host patterns (path.Match) allowed to open live streams besides the page's own origin", func(s string) error {
		c.Origins = nil
		for _, o := range strings.Split(s, ",") {
			if o = strings.TrimSpace(o); o != "" {
				c.Origins = append(c.Origins, o)
			}
		}
		return nil
	})
	fs.StringVar(&c.DebugAddr, "debug-addr", c.DebugAddr, "serve Go's pprof profiles on this address (keep it on loopback); empty: off")
	fs.IntVar(&c.MaxViewers, "max-viewers", c.MaxViewers, "live viewers this node serves at most")
	fs.IntVar(&c.MaxViewersPerIP, "max-viewers-per-ip", c.MaxViewersPerIP, "live viewers per client IP")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", c.ReadHeaderTimeout, "cut off clients that send headers slower than this")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", c.ReadTimeout, "cut off clients that send a request slower than this")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", c.WriteTimeout, "longest time to write a response")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "how long a graceful shutdown waits for in-flight requests")
	fs.VisitAll(func(f *flag.Flag) {
		env := "TALLY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if err := fs.Set(f.Name, v); err != nil {
				fmt.Fprintf(fs.Output(), "ignoring %s=%q: %v\n", env, v, err)
			}
		}
		f.Usage += fmt.Sprintf(" [$%s]", env)
	})
}

// check refuses settings for parts that are not built yet, rather than
// accept them and silently do nothing.
func (c *Config) check() error {
	notYet := map[string]string{"--join": c.Join, "--gossip-key": c.GossipKey, "--nats-url": c.NATSURL}
	for flag, v := range notYet {
		if v != "" {
			return fmt.Errorf("%w: %s: multi-region gossip is not built yet; run a single-region node", ErrConfig, flag)
		}
	}
	if c.Role != "full" {
		return fmt.Errorf("%w: --role %q: only \"full\" is built yet", ErrConfig, c.Role)
	}
	if c.DataDir == "" || c.HTTPAddr == "" {
		return fmt.Errorf("%w: --data-dir and --http-addr are required", ErrConfig)
	}
	return nil
}
