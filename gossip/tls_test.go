package gossip

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tally/gossip/gossiptest"
	"tally/internal/testtls"
	"tally/internal/tlsconf"
)

func tlsIdentity(t *testing.T, ca *testtls.CA, name string) *tlsconf.Identity {
	t.Helper()
	f := ca.Issue(t, name)
	id, err := tlsconf.Load(tlsconf.Files{Cert: f.Cert, Key: f.Key, CA: ca.File})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// With certificates, routes, gateways and an edge's leaf connection run
// over mutual TLS: with
// memberlist partitioned, counts still travel (so over NATS), and a
// stranger is refused on the route, gateway and leaf ports whether it speaks
// plain text, shows another CA's certificate, or shows a good certificate
// without the credential. Each refusal is counted.
func TestNATSRoutesAndGatewaysOverTLS(t *testing.T) {
	ca := testtls.NewCA(t, "cluster")
	var net gossiptest.Network
	withTLS := func(name string) func(*Config) {
		id := tlsIdentity(t, ca, name)
		return func(c *Config) { c.TLS = id.Mutual(); c.WrapTransport = net.Wrap; c.PushPull = time.Hour }
	}
	a := startMember(t, "a", "eu-west", nil, withTLS("a"))
	a2 := startMember(t, "a2", "eu-west", []string{a.GossipAddr()}, withTLS("a2"))
	b := startMember(t, "b", "us-east", []string{a.GossipAddr()}, withTLS("b"))
	edgeTLS := withTLS("e")
	e := startMember(t, "e", "eu-west", []string{a.GossipAddr()}, func(c *Config) { edgeTLS(c); c.Role = RoleEdge })
	all := []*member{a, a2, b, e}
	waitFor(t, 20*time.Second, "a route in eu-west, gateways both ways, the edge a leaf", func() bool {
		ra, ga := a.Mesh().Links()
		_, gb := b.Mesh().Links()
		return ra > 0 && len(ga) == 1 && len(gb) == 1 && e.Mesh().LeafNodes() == 1
	})
	for _, m := range all {
		net.Isolate(m.GossipAddr())
	}
	a.create(t, testPoll("p"))
	waitFor(t, 10*time.Second, "the poll everywhere over NATS with TLS", func() bool { return converged(all, "p", map[string]int64{"a": 0, "b": 0}) })
	a.st.Count("p", "a", 2)
	a2.st.Count("p", "b", 1)
	b.st.Count("p", "b", 3)
	want := map[string]int64{"a": 2, "b": 4}
	waitFor(t, 10*time.Second, "convergence over NATS with TLS", func() bool { return converged(all, "p", want) })

	stranger := testtls.NewCA(t, "stranger").Issue(t, "impostor")
	foreign, err := tls.LoadX509KeyPair(stranger.Cert, stranger.Key)
	if err != nil {
		t.Fatal(err)
	}
	good := tlsIdentity(t, ca, "thief").Client() // a certificate the cluster's CA signed, but no key
	for _, port := range []struct{ name, addr, hello string }{
		{"route", a.self.NATSCluster, `"cluster":"eu-west"`},
		{"gateway", a.self.NATSGateway, `"gateway":"nowhere"`},
		{"leaf", a.self.NATSLeaf, `"headers":true`},
	} {
		before := func(reason string) float64 {
			return testutil.ToFloat64(a.m.refused.WithLabelValues(port.name, reason))
		}
		tlsBefore, authBefore := before("tls"), before("auth")

		// Plain text where TLS is required: no handshake, no answer (a
		// leaf port says its INFO first, then wants the handshake).
		if line := knock(t, port.name == "leaf", port.addr, nil, port.hello); strings.Contains(line, "PONG") || (port.name != "leaf" && strings.Contains(line, "INFO")) {
			t.Errorf("%s answered a stranger in plain text: %q", port.name, line)
		}
		// Another CA's certificate: the handshake fails.
		if line := knock(t, port.name == "leaf", port.addr, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{foreign}}, port.hello); strings.HasPrefix(line, "PONG") {
			t.Errorf("%s took another CA's certificate", port.name)
		}
		// The cluster CA's certificate without the credential.
		if line := knock(t, port.name == "leaf", port.addr, good, port.hello); !strings.Contains(line, "Authorization Violation") {
			t.Errorf("%s with a good certificate and no credential: %q", port.name, line)
		}
		waitFor(t, 5*time.Second, port.name+" refusals counted", func() bool {
			return before("tls") > tlsBefore && before("auth") > authBefore
		})
	}
	if !converged(all, "p", want) {
		t.Fatal("the counts changed after the stranger")
	}
}

// knock speaks the NATS protocol to a route, gateway or leaf port as a stranger's
// server would and returns the server's answer to its CONNECT, or what
// ended the exchange. With cfg it opens with the TLS handshake (where TLS
// is required a route or gateway shakes hands before its INFO, a leaf
// port after it); without, it sends its CONNECT in plain text at once.
func knock(t *testing.T, leaf bool, addr string, cfg *tls.Config, hello string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	var c net.Conn = conn
	r := bufio.NewReader(c)
	if cfg != nil && leaf {
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
			return fmt.Sprintf("before the handshake: %q %v", line, err)
		}
	}
	if cfg != nil {
		cfg = cfg.Clone()
		cfg.ServerName = "127.0.0.1"
		tc := tls.Client(conn, cfg)
		if err := tc.Handshake(); err != nil {
			return "handshake: " + err.Error()
		}
		c = tc
		r = bufio.NewReader(c)
	}
	fmt.Fprintf(c, "CONNECT {\"verbose\":false,\"pedantic\":false,\"user\":\"tally\",\"pass\":\"guess\",\"tls_required\":%t,\"name\":\"stranger\",%s}\r\nPING\r\n", cfg != nil, hello)
	var lines []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return strings.Join(append(lines, "read: "+err.Error()), " | ")
		}
		if !strings.HasPrefix(line, "INFO ") {
			return strings.Join(append(lines, line), " | ")
		}
		lines = append(lines, "INFO")
	}
}

// An external NATS that requires TLS and an nkey: the node connects with
// --nats-nkey and the CA, and gossip flows through it.
func TestExternalNATSWithNKeyAndTLS(t *testing.T) {
	ca := testtls.NewCA(t, "nats")
	srvCert := tlsIdentity(t, ca, "nats-server")
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	seedFile := filepath.Join(t.TempDir(), "tally.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	srvTLS := srvCert.Server()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true,
		Nkeys: []*server.NkeyUser{{Nkey: pub}}, TLSConfig: srvTLS, TLS: true, TLSTimeout: 5})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(ns.Shutdown)
	clientTLS, err := tlsconf.ClientOnly(ca.File, "", "")
	if err != nil {
		t.Fatal(err)
	}
	url := ns.ClientURL() // tls://…
	ext := func(c *Config) { c.NATSURL, c.NATSNKeyFile, c.NATSTLS = url, seedFile, clientTLS }
	a := startMember(t, "a", "eu-west", nil, ext)
	b := startMember(t, "b", "us-east", []string{a.GossipAddr()}, func(c *Config) { ext(c); c.PushPull = time.Hour })
	waitFor(t, 10*time.Second, "both connected to the external NATS", func() bool { return a.Mesh().Connected() && b.Mesh().Connected() })
	a.create(t, testPoll("p"))
	a.st.Count("p", "a", 5)
	waitFor(t, 10*time.Second, "the count at b", func() bool { return converged([]*member{a, b}, "p", map[string]int64{"a": 5, "b": 0}) })

	for name, mutate := range map[string]func(*Config){
		"creds and nkey":  func(c *Config) { c.NATSCredsFile = seedFile },
		"missing creds":   func(c *Config) { c.NATSNKeyFile, c.NATSCredsFile = "", filepath.Join(t.TempDir(), "none.creds") },
		"nkey not a seed": func(c *Config) { c.NATSNKeyFile = ca.File },
		"missing nkey":    func(c *Config) { c.NATSNKeyFile = filepath.Join(t.TempDir(), "none.nk") },
	} {
		cfg := a.cfg
		cfg.NodeName, cfg.Registerer, cfg.BindAddr = "x", nil, "127.0.0.1:0"
		ext(&cfg)
		mutate(&cfg)
		g, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Start(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Start %v, want ErrConfig", name, err)
		}
		g.Close()
	}
}
