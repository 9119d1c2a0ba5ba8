package node

// How the nodes trust each other: TLS between them (--tls-cert) and the
// cluster credential on their HTTP calls (PeerHeader).

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"time"

	"tally/api"
	"tally/internal/tlsconf"
)

// loadTLS reads the node's TLS files (nil, nil without --tls-cert) and
// the external NATS's client TLS settings (nil: none given).
func (c *Config) loadTLS(onReload func(error)) (id *tlsconf.Identity, natsTLS *tls.Config, err error) {
	if c.TLSCert != "" || c.TLSKey != "" {
		if id, err = tlsconf.Load(tlsconf.Files{Cert: c.TLSCert, Key: c.TLSKey, CA: c.TLSCA}); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		id.OnReload = onReload
	} else if c.TLSCA != "" {
		return nil, nil, fmt.Errorf("%w: --tls-ca verifies peers over TLS and needs --tls-cert and --tls-key", ErrConfig)
	}
	if c.NATSCA != "" || c.NATSCert != "" || c.NATSKey != "" {
		if c.NATSURL == "" {
			return nil, nil, fmt.Errorf("%w: --nats-ca, --nats-cert and --nats-key are for an external NATS (--nats-url); the embedded server's routes use --tls-cert", ErrConfig)
		}
		if natsTLS, err = tlsconf.ClientOnly(c.NATSCA, c.NATSCert, c.NATSKey); err != nil {
			return nil, nil, fmt.Errorf("%w: --nats-ca/--nats-cert/--nats-key: %v", ErrConfig, err)
		}
	}
	if (c.NATSCreds != "" || c.NATSNKey != "") && c.NATSURL == "" {
		return nil, nil, fmt.Errorf("%w: --nats-creds and --nats-nkey are for an external NATS (--nats-url); the embedded server's credentials come from --gossip-key", ErrConfig)
	}
	return id, natsTLS, nil
}

// listen binds addr, serving TLS only when the node has a certificate.
func (n *Node) listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil || n.tls == nil {
		return ln, err
	}
	return tls.NewListener(ln, n.tls.Server()), nil
}

// scheme is the URL scheme of this node's HTTP listeners.
func (n *Node) scheme() string {
	if n.tls != nil {
		return "https"
	}
	return "http"
}

// peerClient is the HTTP client of node-to-node calls: it verifies the
// peers' certificates with --tls-ca when the node has TLS files.
func (n *Node) peerClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if n.tls != nil {
		t.TLSClientConfig = n.tls.Client()
	}
	return &http.Client{Transport: t, Timeout: 5 * time.Minute}
}

// natsMutual is the TLS of the embedded NATS server's routes and
// gateways: mutual, verified with --tls-ca (nil without TLS files).
func natsMutual(id *tlsconf.Identity) *tls.Config {
	if id == nil {
		return nil
	}
	return id.Mutual()
}

// PeerHeader carries the cluster credential on node-to-node calls (the
// certifier fetching a replica's ledger): never the admin token, which a
// node may not share with the others and must not send over the network.
const PeerHeader = "Tally-Peer"

// peerTokens derives the node-to-node credential from each gossip key (a
// purpose-bound HMAC, so the key itself never travels): the first is
// sent, all are accepted, so the key rotation of docs/operations.md works
// for this path too. None without a key: a single node has no peers.
func peerTokens(keys [][]byte) []string {
	var out []string
	for _, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte("tally peer credential v1"))
		out = append(out, hex.EncodeToString(m.Sum(nil)))
	}
	return out
}

// adminOrPeer lets a request through with the admin token or with a valid
// cluster credential in PeerHeader; else 401.
func (n *Node) adminOrPeer(h http.HandlerFunc) http.Handler {
	admin := api.RequireBearer(n.adminTokens, h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get(PeerHeader); got != "" {
			for _, t := range n.peerTokens {
				if subtle.ConstantTimeCompare([]byte(got), []byte(t)) == 1 {
					h(w, r)
					return
				}
			}
			api.WriteError(w, r, api.Errorf(http.StatusUnauthorized, api.CodeUnauthorized, "cluster credential not accepted: the nodes must share --gossip-key"))
			return
		}
		admin.ServeHTTP(w, r)
	})
}
