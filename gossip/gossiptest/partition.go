package gossiptest

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// ErrPartitioned is what a blocked dial returns.
var ErrPartitioned = errors.New("gossiptest: partitioned")

// Network decides which memberlist nodes can reach each other. The zero
// value lets everything through.
type Network struct {
	mu    sync.Mutex
	group map[string]int // gossip address → partition group; absent: group 0
}

// Wrap is a gossip.Config.WrapTransport that puts the node on n.
func (n *Network) Wrap(t memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
	return &transport{NodeAwareTransport: t, net: n}
}

// Isolate puts the nodes at the given gossip addresses in a partition of
// their own: they reach each other but no one else.
func (n *Network) Isolate(addrs ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.group == nil {
		n.group = map[string]int{}
	}
	next := 1
	for _, g := range n.group {
		next = max(next, g+1)
	}
	for _, a := range addrs {
		n.group[a] = next
	}
}

// Release returns the nodes at addrs to the main partition.
func (n *Network) Release(addrs ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range addrs {
		delete(n.group, a)
	}
}

// Heal removes every partition.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.group = nil
}

func (n *Network) blocked(from, to string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.group[from] != n.group[to]
}

// transport drops what its node sends across a partition. Every node of a
// test cluster is wrapped, so filtering the sender's side cuts both
// directions.
type transport struct {
	memberlist.NodeAwareTransport
	net  *Network
	self string
}

func (t *transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	a, p, err := t.NodeAwareTransport.FinalAdvertiseAddr(ip, port)
	if err == nil {
		t.self = net.JoinHostPort(a.String(), strconv.Itoa(p))
	}
	return a, p, err
}

func (t *transport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.net.blocked(t.self, addr) {
		return time.Now(), nil // lost on the way, as UDP would
	}
	return t.NodeAwareTransport.WriteTo(b, addr)
}

func (t *transport) WriteToAddress(b []byte, addr memberlist.Address) (time.Time, error) {
	if t.net.blocked(t.self, addr.Addr) {
		return time.Now(), nil
	}
	return t.NodeAwareTransport.WriteToAddress(b, addr)
}

func (t *transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if t.net.blocked(t.self, addr) {
		return nil, ErrPartitioned
	}
	return t.NodeAwareTransport.DialTimeout(addr, timeout)
}

func (t *transport) DialAddressTimeout(addr memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.net.blocked(t.self, addr.Addr) {
		return nil, ErrPartitioned
	}
	return t.NodeAwareTransport.DialAddressTimeout(addr, timeout)
}
