package node

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"tally/ledger"
)

// TestLiveEqualsReconcile is invariant 4: with one replica and no faults,
// after a random mix of votes, retries, changes, batches and late votes,
// the live tally equals ledger.Reconcile of the node's own ledger — and so
// it does again after a restart rebuilt the counters from the ledger.
func TestLiveEqualsReconcile(t *testing.T) {
	dir := t.TempDir()
	tn := startNode(t, dir, func(c *Config) { c.Limits.IPRate, c.Limits.VoterRate = 0, 0 })
	tn.createPoll(t, "p")
	rng := rand.New(rand.NewPCG(7, 11))
	options := []string{"a", "b", "c"}
	var sent []string // bodies already sent, for retries
	for i := range 600 {
		var body string
		switch {
		case len(sent) > 0 && rng.IntN(5) == 0:
			body = sent[rng.IntN(len(sent))] // retry
		case rng.IntN(6) == 0:
			var parts []string
			for j := range 1 + rng.IntN(10) {
				parts = append(parts, vote(options[rng.IntN(3)], fmt.Sprint("v", rng.IntN(80)), fmt.Sprintf("b%d-%d", i, j)))
			}
			body = `{"votes":[` + strings.Join(parts, ",") + `]}`
		default:
			body = vote(options[rng.IntN(3)], fmt.Sprint("v", rng.IntN(80)), fmt.Sprint("k", i))
		}
		sent = append(sent, body)
		if i == 500 { // the rest arrive in the grace window
			closes := int64(tn.call(t, "GET", "/v1/polls/p", "").body["closes_at"].(float64))
			tn.clock.ms.Store(closes + 100)
		} else if i < 500 && rng.IntN(3) == 0 {
			tn.clock.advance(time.Duration(rng.IntN(50)) * time.Millisecond)
		}
		if r := tn.call(t, "POST", "/v1/polls/p/votes", body); r.status != 200 {
			t.Fatalf("vote %d: %d %s", i, r.status, r.raw)
		}
	}
	check := func(tn *testNode) {
		t.Helper()
		res, err := ledger.Reconcile(tn.Ledger().Scan("p"))
		if err != nil {
			t.Fatal(err)
		}
		live := tn.totals(t, "p")
		for _, o := range options {
			if uint64(live[o]) != res.Totals[o] {
				t.Fatalf("option %s: live %d, reconciled %d", o, live[o], res.Totals[o])
			}
		}
		if uint64(live["_total"]) != res.Total || res.Late == 0 || res.Superseded == 0 {
			t.Fatalf("live %v, reconciled %+v", live, res)
		}
	}
	check(tn)
	if err := tn.stop(); err != nil {
		t.Fatal(err)
	}
	again := startNodeAt(t, dir, tn.clock.ms.Load(), nil)
	check(again)
	// Every acknowledged key is still known.
	if r := result(t, again.call(t, "POST", "/v1/polls/p/votes", sent[0]), 0); r["status"] != "duplicate" {
		t.Fatalf("retry after restart: %v", r)
	}
}

func TestFlagsHaveEnvFallbacks(t *testing.T) {
	t.Setenv("TALLY_REGION", "eu")
	t.Setenv("TALLY_RATE_VOTER", "7.5")
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	var help bytes.Buffer
	fs.SetOutput(&help)
	cfg.RegisterFlags(fs)
	if err := fs.Parse([]string{"--http-addr", "127.0.0.1:9"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu" || cfg.Limits.VoterRate != 7.5 || cfg.HTTPAddr != "127.0.0.1:9" {
		t.Fatalf("config: %+v", cfg)
	}
	// A flag on the command line beats the environment.
	if err := fs.Parse([]string{"--region", "us"}); err != nil || cfg.Region != "us" {
		t.Fatalf("flag over env: %v %q", err, cfg.Region)
	}
	fs.PrintDefaults()
	for _, name := range []string{"data-dir", "http-addr", "region", "node-name", "admin-token", "gossip-addr", "join", "gossip-key", "nats-url", "nats-addr", "role", "tick", "trusted-proxies"} {
		if !strings.Contains(help.String(), "-"+name) || !strings.Contains(help.String(), "TALLY_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))) {
			t.Errorf("--help lacks %s or its environment variable", name)
		}
	}
}

// A TALLY_* value that does not parse is an error, as the same flag is,
// not a warning and the default.
func TestBadEnvValuesAreErrors(t *testing.T) {
	for env, want := range map[string]string{"TALLY_RATE_IP": "--rate-ip", "TALLY_TICK": "--tick", "TALLY_REQUIRE_SESSION": "--require-session", "TALLY_MAX_BODY": "--max-body"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "fast")
			cfg := DefaultConfig()
			fs := flag.NewFlagSet("node", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			cfg.RegisterFlags(fs)
			if err := fs.Parse(nil); err != nil {
				t.Fatal(err)
			}
			cfg.DataDir = t.TempDir()
			_, err := Open(cfg)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "$"+env) || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s=fast: %v", env, err)
			}
		})
	}
}

func TestRefusesBadClusterSettings(t *testing.T) {
	for name, mutate := range map[string]func(*Config){
		"unknown role":        func(c *Config) { c.Role = "cloud" },
		"edge without --join": func(c *Config) { c.Role = "edge" },
		"key not base64":      func(c *Config) { c.GossipKey = "not base64!" },
		"key of 5 bytes":      func(c *Config) { c.GossipKey = "aGVsbG8=" },
		"unknown profile":     func(c *Config) { c.GossipProfile = "mars" },
		"bad node name":       func(c *Config) { c.NodeName = "a b" },
		"bad cluster name":    func(c *Config) { c.Cluster = "a.b" },
		"join without a key":  func(c *Config) { c.Join = []string{"127.0.0.1:1"} },
	} {
		cfg := DefaultConfig()
		cfg.DataDir, cfg.HTTPAddr = t.TempDir(), "127.0.0.1:0"
		mutate(&cfg)
		if _, err := Open(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: got %v, want ErrConfig", name, err)
		}
	}
}

// TestSlowClientsAreCutOff: a client that never finishes its headers is
// disconnected by the read-header timeout.
func TestSlowClientsAreCutOff(t *testing.T) {
	tn := startNode(t, t.TempDir(), func(c *Config) { c.ReadHeaderTimeout = 200 * time.Millisecond })
	conn, err := net.Dial("tcp", tn.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("POST /v1/polls/p/votes HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	// The server must close the connection well before this deadline.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.ReadAll(bufio.NewReader(conn))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server kept a slow client's connection open")
	}
}

func TestMetricsAndHealth(t *testing.T) {
	tn := startNode(t, t.TempDir(), nil)
	tn.createPoll(t, "p")
	result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("a", "v", "k")), 0)
	result(t, tn.call(t, "POST", "/v1/polls/p/votes", vote("a", "v", "k")), 0)
	tn.call(t, "POST", "/v1/polls/p/votes", vote("zz", "v", "k2"))
	r := tn.call(t, "GET", "/metrics", "")
	for _, want := range []string{
		`tally_votes_total{reason="",result="accepted"} 1`,
		`tally_votes_total{reason="",result="duplicate"} 1`,
		`tally_votes_total{reason="invalid_option",result="rejected"} 1`,
		"tally_ingest_seconds_bucket", "tally_ledger_commit_seconds_bucket", "tally_ledger_batch_records_bucket",
		"tally_open_polls 1", "tally_replay_seconds", "tally_ledger_wal_syncs_total",
	} {
		if !strings.Contains(r.raw, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if r := tn.call(t, "GET", "/healthz", ""); r.status != 200 {
		t.Fatalf("healthz %d", r.status)
	}
	if r := tn.call(t, "GET", "/readyz", ""); r.status != 200 {
		t.Fatalf("readyz %d", r.status)
	}
	if r := tn.call(t, "GET", "/", ""); r.status != 200 || !strings.Contains(r.raw, "<title>Tally</title>") {
		t.Fatalf("page: %d", r.status)
	}
	if r := tn.call(t, "GET", "/v1/cluster", ""); r.status != 200 || !strings.Contains(r.raw, tn.Replica()) {
		t.Fatalf("cluster: %s", r.raw)
	}
}
