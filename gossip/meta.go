package gossip

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
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
	Region      string `json:"region"`
	Replica     string `json:"replica"`
	Role        string `json:"role"`
	HTTP        string `json:"http,omitempty"`
	HTTPS       bool   `json:"https,omitempty"`        // HTTP serves TLS only
	NATSCluster string `json:"nats_cluster,omitempty"` // embedded server's route listener
	NATSGateway string `json:"nats_gateway,omitempty"` // embedded server's gateway listener
	NATSLeaf    string `json:"nats_leaf,omitempty"`    // embedded server's leaf node listener (full nodes)
	// Pub is the replica's Ed25519 public key (base64): the key its
	// certificates are verified with. Memberlist's keyring authenticates
	// the metadata that carries it.
	Pub string `json:"pub,omitempty"`
}

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
