package gossip

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Roles a node can have.
const (
	RoleFull = "full" // takes votes and serves viewers
	RoleEdge = "edge" // serves viewers from gossiped state and relays their votes to full nodes (package relay)
)

// DefaultBindAddr is memberlist's address when Config.BindAddr is empty.
const DefaultBindAddr = ":7946"

// DefaultNATSAddr is the embedded NATS server's client address when
// Config.NATSAddr is empty.
const DefaultNATSAddr = "127.0.0.1:4222"

// DefaultRetention is how long after its close (plus grace) a poll is
// still gossiped when Config.Retention is zero.
const DefaultRetention = 24 * time.Hour

// CheckRole refuses a role that is neither RoleFull nor RoleEdge, as a
// *FieldError of Role.
func CheckRole(role string) error {
	if role != RoleFull && role != RoleEdge {
		return &FieldError{Field: "Role", Value: role, Err: errors.New("want full or edge")}
	}
	return nil
}

// CheckKeys refuses gossip keys that are not 16, 24 or 32 bytes, as a
// *FieldError of Keys naming the key by its place (from 1).
func CheckKeys(keys [][]byte) error {
	for i, k := range keys {
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return &FieldError{Field: "Keys", Err: fmt.Errorf("key %d is %d bytes; want 16, 24 or 32", i+1, n)}
		}
	}
	return nil
}

// meta is what a node tells the others about itself in its memberlist
// metadata (at most 512 bytes). Empty hosts mean "my memberlist address".
type meta struct {
	Region  string `json:"region"`
	Replica string `json:"replica"`
	Role    string `json:"role"`
	HTTP    string `json:"http,omitempty"`
	HTTPS   bool   `json:"https,omitempty"` // HTTP serves TLS only
	// Admin is the admin listener (--admin-addr; TLS as HTTP), where the
	// node's whole GET /v1/cluster is; absent without one and from
	// releases before it, which ignore it (decodeMeta takes unknown
	// fields, and must go on taking them).
	Admin       string `json:"admin,omitempty"`
	NATSCluster string `json:"nats_cluster,omitempty"` // embedded server's route listener
	NATSGateway string `json:"nats_gateway,omitempty"` // embedded server's gateway listener
	NATSLeaf    string `json:"nats_leaf,omitempty"`    // embedded server's leaf node listener (full nodes)
	// Pub is the replica's Ed25519 public key (base64): the key its
	// certificates are verified with. Memberlist's keyring authenticates
	// the metadata that carries it.
	Pub string `json:"pub,omitempty"`
	// Proto is the cluster protocol the node speaks (Protocol); absent
	// in the metadata of releases before v0.5.0, which speak 1.
	Proto int `json:"proto,omitempty"`
	// Rel is the node's release (its build version, at most 24 bytes),
	// shown to operators; nothing depends on it.
	Rel string `json:"rel,omitempty"`
}

// Protocol is the cluster protocol of this release: every format one
// node sends another (memberlist metadata and push/pull state, the NATS
// deltas, catch-up, relay and buddy messages, the definitions and
// certificates they carry). Each of those formats keeps its own magic or
// version, and a release reads the formats of the release before it and
// writes none that release cannot read, so two neighbouring releases run
// side by side during a rolling upgrade or a rollback. A member whose
// protocol is more than ProtocolWindow away is refused
// (docs/operations.md "Versions and compatibility").
//
// 3 (after v0.5.0): a full node reads relay batches TRQ5 (proof
// requests; answers TRA3, with the votes' receipts), which an edge sends
// only while every full node speaks 3 or later.
const Protocol = 3

// ProtocolWindow is how far a member's protocol may be from this node's:
// one release either way (N-1 during an upgrade, N+1 during a rollback).
const ProtocolWindow = 1

// release bounds an announced release to 24 bytes.
func release(r string) string {
	if len(r) > 24 {
		return r[:24]
	}
	return r
}

// protocolOf is the protocol a member's metadata states: releases before
// the field (v0.4.0 and earlier) speak 1.
func protocolOf(m meta) int {
	if m.Proto == 0 {
		return 1
	}
	return m.Proto
}

// compatible says whether this node can run beside a member speaking
// protocol p.
func compatible(p int) bool { return p >= Protocol-ProtocolWindow && p <= Protocol+ProtocolWindow }

// protocolGate is memberlist's alive delegate at a node of a cluster: it
// refuses a member whose protocol is outside the window, with one log
// line per member and protocol (memberlist asks again with every alive
// message it hears).
type protocolGate struct {
	g       *Gossip
	logged  sync.Map     // name + "/" + protocol → struct{}
	refused atomic.Int64 // unix ms of the last refusal (ProtocolRefused)
}

// ProtocolRefused reports whether this node refused a member, or a join,
// for its protocol within the last minute: why a node whose seeds answer
// is alone.
func ProtocolRefused(g *Gossip) bool {
	if g.gate == nil {
		return false
	}
	ms := g.gate.refused.Load()
	return ms != 0 && time.Since(time.UnixMilli(ms)) < time.Minute
}

// NotifyMerge refuses a join whose other side speaks no protocol within
// the window: its state is not merged here, and memberlist cancels the
// join. (The alive checks refuse each such member, but a join's push/pull
// hands its state to the delegate whatever they decided.) A join through
// a member of the release before, which takes any member, still brings
// the compatible ones.
func (p *protocolGate) NotifyMerge(peers []*memberlist.Node) error {
	var far *memberlist.Node
	v := 0
	for _, peer := range peers {
		if peer.Name == p.g.cfg.NodeName {
			continue
		}
		m, err := decodeMeta(peer.Meta)
		if err == nil && compatible(protocolOf(m)) {
			return nil
		}
		if far == nil && err == nil {
			far, v = peer, protocolOf(m)
		}
	}
	if far == nil {
		return nil // nobody readable: the alive checks refuse them one by one
	}
	p.refuse(far, v)
	return fmt.Errorf("%w: a join from members speaking cluster protocol %d, outside %d to %d", ErrProtocol, v, Protocol-ProtocolWindow, Protocol+ProtocolWindow)
}

// NotifyAlive refuses a member outside the protocol window (and one whose
// metadata cannot be read: it cannot say what it speaks).
func (p *protocolGate) NotifyAlive(peer *memberlist.Node) error {
	if peer.Name == p.g.cfg.NodeName {
		return nil
	}
	m, err := decodeMeta(peer.Meta)
	if err != nil {
		p.g.m.dropped.WithLabelValues(pathPushPull, "malformed").Inc()
		return err
	}
	if v := protocolOf(m); !compatible(v) {
		return p.refuse(peer, v)
	}
	return nil
}

// refuse counts and (once per member and protocol) logs a member outside
// the window, and returns the error memberlist is given.
func (p *protocolGate) refuse(peer *memberlist.Node, v int) error {
	p.g.m.dropped.WithLabelValues(pathPushPull, "protocol").Inc()
	p.refused.Store(time.Now().UnixMilli())
	err := fmt.Errorf("%w: member %s at %s speaks cluster protocol %d; this node speaks %d and runs beside %d to %d only: upgrade or roll back one release at a time",
		ErrProtocol, peer.Name, peer.Address(), v, Protocol, Protocol-ProtocolWindow, Protocol+ProtocolWindow)
	if _, seen := p.logged.LoadOrStore(peer.Name+"/"+strconv.Itoa(v), struct{}{}); !seen {
		p.g.log.Error("gossip: member refused", "err", err, "name", peer.Name, "addr", peer.Address(), "protocol", v)
	}
	return err
}

// ErrProtocol is returned for a member speaking a cluster protocol outside
// this node's window.
var ErrProtocol = errors.New("gossip: incompatible protocol")

func (m meta) encode(limit int) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("gossip: node metadata is %d bytes, over memberlist's %d", len(b), limit)
	}
	return b, nil
}

// decodeMeta reads a member's metadata. It takes fields it does not know
// (a newer release's), as the releases before took Admin: never strict.
func decodeMeta(b []byte) (meta, error) {
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return meta{}, fmt.Errorf("%w: node metadata: %v", ErrMalformed, err)
	}
	return m, nil
}

// resolve fills an empty or unspecified host of addr with host.
func resolve(addr string, host net.IP) string {
	if addr == "" {
		return ""
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(h); h == "" || ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort(host.String(), p)
	}
	return addr
}

// hostPort splits addr into a host and a port number.
func hostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", addr)
	}
	return h, port, nil
}

// freePort resolves port 0 in addr to a port free right now, so the
// address can be announced before the listener starts.
func freePort(addr string) (string, error) {
	h, port, err := hostPort(addr)
	if err != nil {
		return addr, err
	}
	l, err := net.Listen("tcp", addr) // a fixed port too: one already taken is an error now, not a timeout later
	if err != nil {
		return addr, err
	}
	if port != 0 {
		l.Close()
		return addr, nil
	}
	defer l.Close()
	return net.JoinHostPort(h, strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), nil
}
