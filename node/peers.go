package node

// How the nodes trust each other — TLS between them (--tls-cert), the
// cluster credential on their HTTP calls (PeerHeader) — and what a node
// asks of the others: to confirm a close before it is answered, and the
// keys of replicas it never met.

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"time"

	"tally/api"
	"tally/certify"
	"tally/internal/tlsconf"
	"tally/state"
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

// closeWait bounds how long a close waits for the other full nodes to
// confirm it: far above a push's round trip (milliseconds within a
// continent, ~300 ms around the world), short enough for a producer on
// air. A node that has not confirmed by then is named in the answer.
const closeWait = time.Second

// closer returns what makes a close written at n hold before the host is
// answered (admin.Config.Closed): n's votes in flight are answered first,
// then the new definition is pushed to every full node, which applies it,
// answers its own votes in flight and confirms. So the last "accepted" of
// any node that confirmed comes before the close's answer
// (docs/certification.md, "The close").
func closer(n *Node) func(ctx context.Context, pollID string) *api.CloseReport {
	return func(ctx context.Context, pollID string) *api.CloseReport {
		start := time.Now()
		n.ingest.Settle()
		ctx, cancel := context.WithTimeout(ctx, closeWait)
		defer cancel()
		p, err := n.gossip.PushDefinition(ctx, pollID)
		rep := &api.CloseReport{Confirmed: append([]string{n.replica}, p.Confirmed...), Unconfirmed: p.Unconfirmed,
			TookMs: float64(time.Since(start).Microseconds()) / 1000}
		n.m.closeWait.Observe(time.Since(start).Seconds())
		n.m.closeUnconfirmed.Add(float64(len(p.Unconfirmed)))
		if err != nil || len(p.Unconfirmed) > 0 {
			n.log.Warn("close not confirmed by every full node: those go on counting until they hear of it, and their votes count",
				"poll", pollID, "unconfirmed", p.Unconfirmed, "err", err)
		} else {
			n.log.Info("close confirmed by every full node", "poll", pollID, "confirmed", rep.Confirmed, "took_ms", rep.TookMs)
		}
		return rep
	}
}

// Every replica signs its certificates, chain heads and copies with its
// own Ed25519 key, which it announces in its member metadata; a node
// learns the keys of the members it meets and keeps them. A node that
// never met a replica — a replacement started after the node it replaces
// was lost — would drop that replica's certificates as unverifiable and
// show the poll pending. So it asks the live full members for the keys
// they know (GET /v1/cluster/keys, sent with the cluster credential),
// learns the one it lacks, and applies the certificate. A key learned is
// kept, and a replica's key never changes (state.Definitions.LearnKey).

// keyBook learns the keys certificates need from the live full members
// (gossip.Config.UnknownKey), and serves the keys this node knows.
type keyBook struct {
	n      *Node
	wanted chan state.Certificate // certificates whose certifier's key is not known here
	client *http.Client
}

func newKeyBook(n *Node) *keyBook {
	return &keyBook{n: n, wanted: make(chan state.Certificate, 64), client: n.peerClient()}
}

// handle serves GET /v1/cluster/keys: every replica's public key this
// node knows. Public: anyone verifying a certificate needs them.
func (k *keyBook) handle(w http.ResponseWriter, r *http.Request) {
	keys := k.n.state.Defs.Keys()
	out := api.ClusterKeys{Keys: []api.ReplicaKey{}}
	for _, replica := range slices.Sorted(maps.Keys(keys)) {
		out.Keys = append(out.Keys, api.ReplicaKey{Replica: replica, PublicKey: keys[replica]})
	}
	api.WriteJSON(w, r, http.StatusOK, out)
}

// unknown hands a certificate whose certifier's key is not known to the
// loop: never blocking gossip; one dropped when the loop is busy comes
// again with the next exchange.
func (k *keyBook) unknown(c state.Certificate) {
	select {
	case k.wanted <- c:
	default:
	}
}

// keyAskEvery bounds how often the members are asked for one replica's key.
const keyAskEvery = 5 * time.Second

// loop learns the keys certificates need and applies the certificates,
// each checked as gossip checks one (its signature, then the records it
// counts against those this node knows of), until ctx ends.
func (k *keyBook) loop(ctx context.Context) {
	n := k.n
	asked := map[string]time.Time{}
	for {
		var c state.Certificate
		select {
		case <-ctx.Done():
			return
		case c = <-k.wanted:
		}
		if _, ok := n.state.Defs.PublicKey(c.By); !ok {
			if time.Since(asked[c.By]) < keyAskEvery {
				continue
			}
			asked[c.By] = time.Now()
			if err := k.learn(ctx, c.By); err != nil {
				n.log.Warn("a certificate's key is not known here nor to any member that answered: it stays unapplied", "poll", c.Poll, "by", c.By, "err", err)
				continue
			}
		}
		pub, _ := n.state.Defs.PublicKey(c.By)
		if !c.VerifySignature(pub) {
			n.log.Warn("dropping a certificate whose signature does not verify", "poll", c.Poll, "by", c.By)
			continue
		}
		if err := n.certify.Check(c); err != nil {
			n.log.Warn("refusing a certificate that leaves out records this node knows of", "poll", c.Poll, "certified_by", c.By, "err", err)
			continue
		}
		if changed, err := n.state.Defs.PutCertificate(c); err != nil {
			n.log.Warn("cannot apply a certificate", "poll", c.Poll, "by", c.By, "err", err)
		} else if changed {
			n.log.Info("certificate applied with its certifier's key learned from the members", "poll", c.Poll, "by", c.By)
		}
	}
}

// learn asks the live full members for replica's key and learns the
// first one given.
func (k *keyBook) learn(ctx context.Context, replica string) error {
	n := k.n
	var last error = fmt.Errorf("no live full member to ask")
	for _, p := range n.peers() {
		if !p.Full || p.Replica == n.replica || p.HTTPAddr == "" {
			continue
		}
		key, err := k.ask(ctx, p, replica)
		if err != nil {
			last = err
			continue
		}
		if err := n.state.Defs.LearnKey(replica, key); err != nil {
			return err
		}
		n.log.Info("learned a replica's key from a member", "replica", replica, "from", p.Replica)
		return nil
	}
	return last
}

// ask fetches one member's keys and returns replica's.
func (k *keyBook) ask(ctx context.Context, p certify.Peer, replica string) (ed25519.PublicKey, error) {
	scheme := "http"
	if p.HTTPS {
		scheme = "https"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+p.HTTPAddr+"/v1/cluster/keys", nil)
	if err != nil {
		return nil, err
	}
	if len(k.n.peerTokens) > 0 {
		req.Header.Set(PeerHeader, k.n.peerTokens[0])
	}
	res, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Replica, err)
	}
	defer res.Body.Close()
	var body api.ClusterKeys
	if res.StatusCode != http.StatusOK || json.NewDecoder(http.MaxBytesReader(nil, res.Body, 1<<20)).Decode(&body) != nil {
		return nil, fmt.Errorf("%s: answered %d", p.Replica, res.StatusCode)
	}
	for _, key := range body.Keys {
		if key.Replica == replica && len(key.PublicKey) == ed25519.PublicKeySize {
			return key.PublicKey, nil
		}
	}
	return nil, fmt.Errorf("%s does not know %s's key", p.Replica, replica)
}
