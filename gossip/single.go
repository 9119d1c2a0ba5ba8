package gossip

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"

	"github.com/hashicorp/memberlist"
)

// A node without a cluster key (and without AllowInsecure) is a single
// node (DESIGN invariant 9): it merges nothing from anyone, sends its
// state to nobody, binds gossip to loopback, and its embedded NATS client
// port takes only a random password that this process alone knows.

// refuseKeyless reports whether this node is single, and if so counts
// (and, at most once a second, logs) the message it drops from path.
func (g *Gossip) refuseKeyless(path string, bytes int) bool {
	if !g.single() {
		return false
	}
	g.m.dropped.WithLabelValues(path, "no_key").Inc()
	now, last := g.cfg.Now().UnixMilli(), g.lastNoKey.Load()
	if now-last >= 1000 && g.lastNoKey.CompareAndSwap(last, now) {
		g.log.Warn("dropping gossip: this node has no cluster key and merges nothing (set --gossip-key to run a cluster)", "path", path, "bytes", bytes)
	}
	return true
}

// singleBindHost is the host a single node binds gossip to: loopback when
// none or an unspecified address is given; another address is refused, since
// nothing of a key-less node but HTTP listens beyond loopback.
func singleBindHost(host string) (string, error) {
	if host == "" {
		return "127.0.0.1", nil
	}
	ip := net.ParseIP(host)
	switch {
	case ip != nil && ip.IsUnspecified():
		return "127.0.0.1", nil
	case host == "localhost" || ip != nil && ip.IsLoopback():
		return host, nil
	}
	return "", fmt.Errorf("%w: gossip address %s: a node without a cluster key listens for gossip on loopback only (set the key, or a 127.0.0.1 address)", ErrConfig, host)
}

// localPassword is the embedded NATS client password of a single node:
// random, in memory, for this process's own connection.
func localPassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("gossip: nats password: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// clientPasswords are the passwords of the embedded NATS client port: the
// ones derived from the cluster keys, or a single node's random one.
func (g *Gossip) clientPasswords() []string {
	if pw := natsPasswords(g.cfg.Keys); len(pw) > 0 {
		return pw
	}
	if g.localPass != "" {
		return []string{g.localPass}
	}
	return nil
}

// noMerge refuses every memberlist merge (a join's or a push/pull's node
// list) at a single node, before any of it is applied.
type noMerge struct{ g *Gossip }

// NotifyMerge refuses the merge.
func (n *noMerge) NotifyMerge(peers []*memberlist.Node) error {
	n.g.refuseKeyless(pathPushPull, 0)
	return fmt.Errorf("gossip: refused a merge of %d nodes: this node has no cluster key and takes no members", len(peers))
}
