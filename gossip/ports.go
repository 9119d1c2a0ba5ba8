package gossip

import (
	"cmp"
	"net"
)

// CheckPorts tries, without keeping them, the ports Start will listen on
// — the gossip address (TCP and UDP) and the embedded NATS server's
// listeners this node opens — so that a node can refuse a port another
// process holds, naming its setting, before it serves or says it listens
// (it would otherwise print its banner and fail a moment later, after
// replaying its ledger). Start still reports a port taken in between.
func (g *Gossip) CheckPorts() error {
	cfg := g.cfg
	host, port, err := hostPort(cfg.BindAddr)
	if err != nil {
		return &FieldError{Field: "BindAddr", Value: cfg.BindAddr, Err: err}
	}
	if host, err = g.gossipBindHost(host); err != nil {
		return err
	}
	if port != 0 {
		addr := net.JoinHostPort(host, portOf(cfg.BindAddr))
		if err := tryListen("tcp", addr); err != nil {
			return &FieldError{Field: "BindAddr", Value: cfg.BindAddr, Err: err}
		}
		if err := tryListen("udp", addr); err != nil {
			return &FieldError{Field: "BindAddr", Value: cfg.BindAddr, Err: err}
		}
	}
	if cfg.NATSURL != "" {
		return nil
	}
	listeners := []struct{ field, addr string }{{"NATSAddr", cmp.Or(cfg.NATSAddr, DefaultNATSAddr)}}
	if !g.single() && cfg.Role != RoleEdge { // as Start: routes, gateways and leaves are full members'
		listeners = append(listeners, struct{ field, addr string }{"NATSClusterAddr", cfg.NATSClusterAddr},
			struct{ field, addr string }{"NATSGatewayAddr", cfg.NATSGatewayAddr}, struct{ field, addr string }{"NATSLeafAddr", cfg.NATSLeafAddr})
	}
	for _, l := range listeners {
		if l.addr == "" {
			continue
		}
		if _, p, err := hostPort(l.addr); err != nil || p == 0 {
			continue // a bad address is Start's to name; port 0 is never taken
		}
		if err := tryListen("tcp", l.addr); err != nil {
			return &FieldError{Field: l.field, Value: l.addr, Err: err}
		}
	}
	return nil
}

// portOf returns the port part of host:port.
func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// tryListen listens on addr and stops at once.
func tryListen(network, addr string) error {
	if network == "udp" {
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	return l.Close()
}
