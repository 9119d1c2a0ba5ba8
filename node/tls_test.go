package node

import (
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/internal/testtls"
)

// A cluster given certificates runs every path between nodes over TLS:
// the HTTP listeners serve HTTPS only, the members announce it, the
// certifier fetches the other region's ledger over HTTPS (verified with
// --tls-ca), and the embedded NATS gateways use mutual TLS. The result is
// certified everywhere, which needs each of those paths to work.
func TestClusterOverTLS(t *testing.T) {
	t.Parallel()
	ca := testtls.NewCA(t, "cluster")
	nodes := startCluster(t, []string{"eu-west", "us-east"}, func(i int, c *Config) {
		f := ca.Issue(t, c.NodeName)
		c.TLSCert, c.TLSKey, c.TLSCA = f.Cert, f.Key, ca.File
	})
	for _, n := range nodes {
		if !strings.HasPrefix(n.url, "https://") {
			t.Fatalf("node serves %s", n.url)
		}
		for _, m := range n.gossip.Members() {
			if !m.HTTPS {
				t.Fatalf("%s announces plain HTTP at %s", m.Name, n.replica)
			}
		}
	}
	waitFor(t, func() bool {
		for _, n := range nodes {
			if _, gws := n.gossip.Mesh().Links(); len(gws) != 1 {
				return false
			}
		}
		return true
	})
	nodes[0].createPoll(t, "p")
	havePoll(t, nodes, "p")
	nodes[0].vote(t, "p", "a", "v1")
	nodes[1].vote(t, "p", "b", "v2")
	nodes[1].vote(t, "p", "b", "v3")
	agree(t, nodes, "p", map[string]int64{"a": 1, "b": 2, "c": 0})
	advanceAll(nodes, 70*time.Second)
	v := certifiedEverywhere(t, nodes, "p")
	if v.Totals["a"] != 1 || v.Totals["b"] != 2 {
		t.Fatalf("certified %v", v.Totals)
	}

	// Plain HTTP to a TLS port gets nothing but Go's refusal.
	res, err := http.Get("http://" + nodes[0].Addr() + "/v1/polls/p")
	if err == nil {
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP to the TLS port: %d", res.StatusCode)
		}
	}
	// A client that does not trust the cluster's CA refuses the node.
	if _, err := http.Get(nodes[0].url + "/v1/polls/p"); err == nil {
		t.Fatal("a client without the cluster's CA trusted the node")
	}
}

// TLS and external-NATS settings that cannot work are refused at start,
// in one line that names the flag.
func TestTLSSettingsRefused(t *testing.T) {
	ca := testtls.NewCA(t, "cluster")
	f := ca.Issue(t, "n")
	missing := filepath.Join(t.TempDir(), "none.pem")
	for name, tc := range map[string]struct {
		mutate func(*Config)
		want   string
	}{
		"cert without key":      {func(c *Config) { c.TLSCert = f.Cert }, "--tls-key"},
		"key without cert":      {func(c *Config) { c.TLSKey = f.Key }, "--tls-cert"},
		"CA alone":              {func(c *Config) { c.TLSCA = ca.File }, "--tls-ca"},
		"missing cert":          {func(c *Config) { c.TLSCert, c.TLSKey = missing, f.Key }, "none.pem"},
		"key of the CA":         {func(c *Config) { c.TLSCert, c.TLSKey = f.Cert, ca.File }, "--tls-cert"},
		"nats creds, no url":    {func(c *Config) { c.NATSCreds = f.Key }, "--nats-url"},
		"nats CA, no url":       {func(c *Config) { c.NATSCA = ca.File }, "--nats-url"},
		"nats cert without key": {func(c *Config) { c.NATSURL, c.NATSCert = "tls://127.0.0.1:4222", f.Cert }, "--nats-cert"},
	} {
		cfg := testConfig(t.TempDir(), &fakeClock{})
		tc.mutate(&cfg)
		_, err := Open(cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a one-line ErrConfig naming %s", name, err, tc.want)
		}
	}
}
