package node

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Certification fetches a replica's ledger with the cluster credential,
// not the admin token: regions with different admin tokens certify, and a
// wrong credential is refused like a missing one.
func TestNodeToNodeCallsUseTheClusterCredential(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, []string{"eu-west", "us-east"}, func(i int, c *Config) {
		c.AdminToken = []string{"admin-of-eu", "admin-of-us"}[i]
	})
	a, b := nodes[0], nodes[1]
	r := a.call(t, "POST", "/v1/polls", `{"id":"p","question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":60,"grace_s":0}`,
		"Authorization", "Bearer admin-of-eu")
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	havePoll(t, nodes, "p")
	a.castVote(t, "p", "a", "v1", "k1")
	b.castVote(t, "p", "b", "v2", "k2")
	agree(t, nodes, "p", map[string]int64{"a": 1, "b": 1})
	advanceAll(nodes, 70*time.Second)
	if v := certifiedEverywhere(t, nodes, "p"); v.Total != 2 {
		t.Fatalf("certified: %+v", v)
	}
	for name, h := range map[string][]string{
		"no credential":       nil,
		"a stranger's guess":  {PeerHeader, "0000"},
		"the admin token":     {PeerHeader, "admin-of-us"},
		"another's admin":     {"Authorization", "Bearer admin-of-eu"},
		"a key's base64 form": {PeerHeader, testGossipKey},
	} {
		if r := b.call(t, "GET", "/v1/polls/p/ledger", "", h...); r.status != http.StatusUnauthorized {
			t.Errorf("%s: %d", name, r.status)
		}
	}
	keys, _ := b.cfg.gossipKeys()
	if r := b.call(t, "GET", "/v1/polls/p/ledger", "", PeerHeader, peerTokens(keys)[0]); r.status != http.StatusOK {
		t.Errorf("the cluster credential: %d", r.status)
	}
}

// Secrets come from files (several admin tokens at once for a rotation),
// a secret given twice is an error, and the banner never shows a token.
func TestSecretsFromFilesAndNeverPrinted(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var banner bytes.Buffer
	n := startNode(t, t.TempDir(), func(c *Config) {
		c.AdminToken = ""
		c.AdminTokenFile = write("admin", "new-token\nold-token\n")
		c.GossipKey, c.GossipKeyFile = "", write("key", testGossipKey+"\n")
		c.SessionSecretFile = write("session", "a session secret of thirty-two bytes\n")
		c.Stdout = &banner
	})
	for _, tok := range []string{"new-token", "old-token"} {
		if r := n.call(t, "GET", "/v1/polls/none/ledger", "", "Authorization", "Bearer "+tok); r.status != http.StatusNotFound {
			t.Errorf("admin token %s: %d", tok, r.status)
		}
	}
	if r := n.call(t, "GET", "/v1/polls/none/ledger", "", "Authorization", "Bearer "+testToken); r.status != http.StatusUnauthorized {
		t.Errorf("a token not in the file: %d", r.status)
	}
	if strings.Contains(banner.String(), "new-token") || !strings.Contains(banner.String(), "admin token: in "+filepath.Join(dir, "admin")) {
		t.Errorf("banner: %q", banner.String())
	}
	// The generated token is not printed either.
	var banner2 bytes.Buffer
	m := startNode(t, t.TempDir(), func(c *Config) { c.AdminToken, c.Stdout = "", &banner2 })
	if strings.Contains(banner2.String(), m.AdminToken()) {
		t.Errorf("the generated admin token was printed: %q", banner2.String())
	}
	for name, mutate := range map[string]func(*Config){
		"token and token file":   func(c *Config) { c.AdminTokenFile = write("a2", "x") },
		"missing key file":       func(c *Config) { c.GossipKey, c.GossipKeyFile = "", filepath.Join(dir, "nope") },
		"empty session file":     func(c *Config) { c.SessionSecretFile = write("empty", "\n") },
		"key file not base64":    func(c *Config) { c.GossipKey, c.GossipKeyFile = "", write("bad", "not base64!") },
		"key and key file given": func(c *Config) { c.GossipKeyFile = write("k2", testGossipKey) },
	} {
		cfg := testConfig(t.TempDir(), &fakeClock{})
		mutate(&cfg)
		if _, err := Open(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// With --admin-addr, metrics, members, addresses and profiles leave the
// public port; the page keeps the region freshness it shows.
func TestAdminAddrKeepsInternalsOffThePublicPort(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *Config) { c.AdminAddr = "127.0.0.1:0" })
	if r := n.call(t, "GET", "/metrics", ""); r.status != http.StatusNotFound {
		t.Errorf("public /metrics: %d", r.status)
	}
	r := n.call(t, "GET", "/v1/cluster", "")
	if r.status != http.StatusOK || r.body["regions"] == nil || r.body["members"] != nil || strings.Contains(r.raw, "127.0.0.1") {
		t.Errorf("public /v1/cluster: %d %s", r.status, r.raw)
	}
	admin := "http://" + n.AdminAddr()
	for path, want := range map[string]string{"/metrics": "tally_open_polls", "/v1/cluster": `"members"`, "/debug/pprof/": "goroutine"} {
		res, err := http.Get(admin + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("admin %s: %d", path, res.StatusCode)
		}
	}
	taken := n.AdminAddr()
	cfg := testConfig(t.TempDir(), &fakeClock{})
	cfg.AdminAddr = taken
	if _, err := Open(cfg); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--admin-addr "+taken) {
		t.Fatalf("a taken admin port: %v", err)
	}
}

// A node told to join a cluster without a key refuses to start, in one
// line that names the way out; --insecure-gossip lets it run anyway.
func TestJoinWithoutAKeyRefused(t *testing.T) {
	cfg := testConfig(t.TempDir(), &fakeClock{})
	cfg.GossipKey, cfg.Join = "", []string{"127.0.0.1:1"}
	_, err := Open(cfg)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--insecure-gossip") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("join without a key: %v", err)
	}
	cfg.DataDir, cfg.InsecureGossip = t.TempDir(), true
	n, err := Open(cfg)
	if err != nil {
		t.Fatalf("with --insecure-gossip: %v", err)
	}
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
