package gossip

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ErrUnauthenticated is returned for a gossip message whose seal does not
// verify with any key of the keyring: it is dropped and counted, never
// decoded.
var ErrUnauthenticated = errors.New("gossip: message not authenticated by the cluster key")

// A sealed message is sealMagic, a 32-byte HMAC-SHA256 tag, then the
// encoded message. The MAC key is derived from each gossip key (HMAC of a
// fixed label), so the same secret never serves two purposes. The first
// key seals; every key of the ring verifies, so the three-step key
// rotation of docs/operations.md works for this path as for memberlist's.
const (
	sealMagic = "TS1"
	sealTag   = sha256.Size
)

// keyring seals and opens gossip payloads. Without keys it passes messages
// through unchanged: a node without a key is a single node.
type keyring struct {
	macKeys [][]byte
	relay   [][]byte // the relay's MAC keys (SealRelay): another purpose, another key
}

func newKeyring(keys [][]byte) keyring {
	var k keyring
	for _, key := range keys {
		k.macKeys = append(k.macKeys, derive(key, "tally gossip payload mac v1"))
		k.relay = append(k.relay, derive(key, "tally relay mac v1"))
	}
	return k
}

// forRelay is the keyring that seals the edges' relay messages.
func (k keyring) forRelay() keyring { return keyring{macKeys: k.relay} }

// derive makes a purpose-bound secret from a cluster key.
func derive(key []byte, label string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

func (k keyring) enabled() bool { return len(k.macKeys) > 0 }

// seal prefixes b with the primary key's tag.
func (k keyring) seal(b []byte) []byte {
	if !k.enabled() {
		return b
	}
	out := make([]byte, 0, len(sealMagic)+sealTag+len(b))
	out = append(out, sealMagic...)
	out = append(out, mac(k.macKeys[0], b)...)
	return append(out, b...)
}

// open checks the tag against every key and returns the message.
func (k keyring) open(b []byte) ([]byte, error) {
	if !k.enabled() {
		return b, nil
	}
	if len(b) < len(sealMagic)+sealTag || string(b[:len(sealMagic)]) != sealMagic {
		return nil, ErrUnauthenticated
	}
	tag, body := b[len(sealMagic):len(sealMagic)+sealTag], b[len(sealMagic)+sealTag:]
	for _, key := range k.macKeys {
		if hmac.Equal(tag, mac(key, body)) {
			return body, nil
		}
	}
	return nil, ErrUnauthenticated
}

func mac(key, b []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(sealMagic))
	m.Write(b)
	return m.Sum(nil)
}

// SealRelay seals a relay message (package relay) with the cluster's
// keyring, under the relay's own derived key: only members make one a
// full node believes.
func (g *Gossip) SealRelay(b []byte) []byte { return g.keys.forRelay().seal(b) }

// OpenRelay checks a relay message's seal and returns the message.
func (g *Gossip) OpenRelay(b []byte) ([]byte, error) { return g.keys.forRelay().open(b) }

// RelaySealer seals and opens relay messages under keys as a node of the
// cluster does (the first key seals): for tools that stand in for edges
// (bench/relayload).
func RelaySealer(keys [][]byte) (seal func([]byte) []byte, open func([]byte) ([]byte, error)) {
	k := newKeyring(keys).forRelay()
	return k.seal, k.open
}

// A node whose gossip key differs from its peers' cannot read their
// messages, nor they its: memberlist says so only at debug level, once,
// and both nodes would go on as clusters of one that report ready (issue
// 46). The watch below reads memberlist's log for the decryption failures,
// counts them (tally_gossip_key_mismatch_total), and logs an error naming
// --gossip-key and the peer, at most once a keyMismatchLogEvery while it
// lasts: on the node that cannot read (received), and on the node whose
// join, push/pull or ping the peer could not read (sent).

// keyMismatchLogEvery bounds the error's repetition.
const keyMismatchLogEvery = 30 * time.Second

// decryptFailure matches memberlist's lines and errors for a message no
// installed key could decrypt.
var decryptFailure = regexp.MustCompile(`(?i)no installed keys could decrypt|decrypt packet failed|failed to decrypt`)

// memberlist v0.7.0 names the peer of a failure in one of these ways:
// LogAddress's "from=ADDR" (a packet or stream this node received), "failed
// to join ADDR: " (Join's line for each seed), "Push/Pull with NAME
// failed: " (the periodic push/pull, by member name), and not at all in
// "Failed fallback TCP ping: " (a probe's).
var (
	fromAddr     = regexp.MustCompile(`from=(\S+)`)
	joinAddr     = regexp.MustCompile(`failed to join (\S+): `)
	pushPullName = regexp.MustCompile(`Push/Pull with (\S+) failed: `)
	tcpPing      = regexp.MustCompile(`Failed fallback TCP ping: `)
)

// unnamedPeer stands for the peer of a line that names none.
const unnamedPeer = "unknown (memberlist names none)"

// A keyRefusal is one message the keys of this node and a peer do not share,
// as a memberlist log line reports it.
type keyRefusal struct {
	peer string // its address; a member's name (push/pull); or unnamedPeer
	dir  string // received: this node could not read it; sent: the peer could not read this node's
	join bool   // sent: the peer is a seed, which refused this node's join
}

// refusalOf reads a memberlist log line: whether it reports a key
// mismatch, and with whom.
func refusalOf(line string) (keyRefusal, bool) {
	if !decryptFailure.MatchString(line) {
		return keyRefusal{}, false
	}
	if m := joinAddr.FindStringSubmatch(line); m != nil {
		return keyRefusal{peer: m[1], dir: "sent", join: true}, true
	}
	if m := pushPullName.FindStringSubmatch(line); m != nil {
		return keyRefusal{peer: m[1], dir: "sent"}, true
	}
	if tcpPing.MatchString(line) {
		return keyRefusal{peer: unnamedPeer, dir: "sent"}, true
	}
	if m := fromAddr.FindStringSubmatch(line); m != nil && !strings.HasPrefix(m[1], "<") { // LogAddress(nil): "from=<unknown address>"
		return keyRefusal{peer: m[1], dir: "received"}, true
	}
	return keyRefusal{peer: unnamedPeer, dir: "received"}, true
}

// keyWatch is the log writer memberlist writes to: every line goes on to
// the node's log at debug level, and a decryption failure is reported.
type keyWatch struct {
	g    *Gossip
	next *log.Logger

	mu       sync.Mutex
	lastLog  time.Time
	lastSeen time.Time // the newest failure (seen)
	lastSent time.Time // the newest failure a peer met reading this node's (refused)
	quiet    int       // failures since the last error line
}

// seen reports whether a message of another key was met within the last
// minute.
func (w *keyWatch) seen() bool { return w.within(&w.lastSeen) }

// refused reports whether a peer could not read this node's message within
// the last minute.
func (w *keyWatch) refused() bool { return w.within(&w.lastSent) }

func (w *keyWatch) within(t *time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !t.IsZero() && time.Since(*t) < time.Minute
}

// KeyRefused reports whether, within the last minute, a peer could not
// read this node's gossip for its key: a seed refused its join, or a
// member its push/pull or probe. (A function: Gossip is at its method
// limit.)
func KeyRefused(g *Gossip) bool { return g.keyWatch != nil && g.keyWatch.refused() }

func newKeyWatch(g *Gossip) *keyWatch {
	return &keyWatch{g: g, next: slog.NewLogLogger(g.log.Handler(), slog.LevelDebug)}
}

func (w *keyWatch) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, "\n"))
	w.next.Print(line)
	if r, ok := refusalOf(line); ok {
		if r.dir == "sent" && !r.join && r.peer != unnamedPeer {
			r.peer = memberAddr(w.g, r.peer)
		}
		w.mismatch(r)
	}
	return len(p), nil
}

// memberAddr is the gossip address of the member called name, or name
// when it is not a member.
func memberAddr(g *Gossip, name string) string {
	g.peersMu.Lock()
	defer g.peersMu.Unlock()
	if p, ok := g.members[name]; ok && p.gossip != "" {
		return p.gossip
	}
	return name
}

// The error lines, by the refusal's direction and, sent, whether it was a
// join.
const (
	keyReceivedMsg = "gossip: a node sends messages this node's --gossip-key cannot read: every node of a cluster needs the same key (the other node is not a member of this cluster until it has it)"
	keyJoinMsg     = "gossip: a seed cannot read this node's messages: its --gossip-key is not this node's (this node is not a member of the cluster until the keys match)"
	keySentMsg     = "gossip: a member cannot read this node's messages: its --gossip-key is not this node's (the two drop each other's gossip until the keys match)"
)

// mismatch counts one message that the keys of this node and r's peer do
// not share, and logs the error when it may.
func (w *keyWatch) mismatch(r keyRefusal) {
	w.g.m.keyMismatch.WithLabelValues(r.dir).Inc()
	w.mu.Lock()
	now := time.Now()
	w.lastSeen = now
	if r.dir == "sent" {
		w.lastSent = now
	}
	if !w.lastLog.IsZero() && now.Sub(w.lastLog) < keyMismatchLogEvery {
		w.quiet++
		w.mu.Unlock()
		return
	}
	suppressed := w.quiet
	w.lastLog, w.quiet = now, 0
	w.mu.Unlock()
	msg := keyReceivedMsg
	switch {
	case r.join:
		msg = keyJoinMsg
	case r.dir == "sent":
		msg = keySentMsg
	}
	w.g.log.Error(msg, "peer", r.peer, "flag", "--gossip-key", "suppressed", suppressed)
}

// joinFailed reports whether a failed join was refused for the key. Join
// wrote a line for each seed that refused it, which Write has counted and
// logged naming that seed: the error, all seeds' in one, adds nothing.
func (w *keyWatch) joinFailed(_ []string, err error) bool {
	return err != nil && decryptFailure.MatchString(err.Error())
}

// setAccounts names the accounts. NATS wants a system account where leaf
// nodes meet gateways; with only that and the global account it would let
// clients in without a password, so with a key the node's clients and its
// edges' leaf connections share one named account (natsAccount). Every
// server of a cluster is set alike, whatever its role.
func setAccounts(opts *server.Options, passwords []string) {
	if len(passwords) == 0 {
		// A key-less single node opens no gateway or leaf listener; a
		// key-less cluster (AllowInsecure) keeps the global account.
		opts.Accounts = []*server.Account{server.NewAccount(server.DEFAULT_SYSTEM_ACCOUNT)}
		opts.SystemAccount = server.DEFAULT_SYSTEM_ACCOUNT
		return
	}
	opts.Accounts = []*server.Account{server.NewAccount(natsAccount), server.NewAccount(server.DEFAULT_SYSTEM_ACCOUNT)}
	opts.SystemAccount = server.DEFAULT_SYSTEM_ACCOUNT
	opts.Users = []*server.User{{Username: natsUser, Password: passwords[0], Account: opts.Accounts[0]}}
}

// natsUser is the user name of the embedded server's every port.
const natsUser = "tally"

// natsAccount is the NATS account of a keyed cluster's clients and leaf
// nodes.
const natsAccount = "TALLY"

// natsPasswords derives the embedded NATS password from each cluster key
// (the first is the server's own); none without a key.
func natsPasswords(keys [][]byte) []string {
	var out []string
	for _, k := range keys {
		out = append(out, hex.EncodeToString(derive(k, "tally nats password v1")))
	}
	return out
}

// NATSCredential is the user and password of the embedded NATS server of
// a node whose first cluster key is key: for tools that stand in for an
// edge (bench/relayload).
func NATSCredential(key []byte) (user, password string) {
	return natsUser, natsPasswords([][]byte{key})[0]
}
