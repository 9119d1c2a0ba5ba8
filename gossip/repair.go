package gossip

import (
	"context"
	"slices"
	"time"
)

// pokeRepair asks the repair loop to look at the membership now.
func (ms *Mesh) pokeRepair() {
	select {
	case ms.poke <- struct{}{}:
	default:
	}
}

// repairLoop keeps the embedded server connected to every member it
// should reach. NATS discovers routes and gateways by itself once one side
// knows the other; this covers the rest (two nodes that started apart and
// met later through memberlist): a peer that is neither configured nor
// connected for two checks in a row gets the server restarted with it
// added. The client reconnects to the same port.
func (ms *Mesh) repairLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var missingSince time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-ms.poke:
		}
		switch {
		case !ms.missingPeers():
			missingSince = time.Time{}
		case missingSince.IsZero():
			missingSince = time.Now()
		case time.Since(missingSince) >= repairAfter:
			ms.restartEmbedded()
			missingSince = time.Time{}
		}
	}
}

// repairAfter is how long a peer may stay unconnected before the embedded
// server is restarted to reach it (NATS usually connects it by itself).
const repairAfter = 5 * time.Second

// Links returns how many nodes the embedded server has live routes to
// and the regions its gateways reach (outbound); zero without an embedded
// server.
func (ms *Mesh) Links() (routes int, gateways []string) {
	ms.mu.Lock()
	emb := ms.emb
	ms.mu.Unlock()
	if emb == nil {
		return 0, nil
	}
	// NATS pools several connections per route (and one per pinned
	// account): count the nodes routed to.
	if rz, err := emb.srv.Routez(nil); err == nil {
		peers := map[string]bool{}
		for _, r := range rz.Routes {
			peers[r.RemoteName] = true
		}
		routes = len(peers)
	}
	if gz, err := emb.srv.Gatewayz(nil); err == nil {
		for region, gw := range gz.OutboundGateways {
			if gw.Connection != nil {
				gateways = append(gateways, region)
			}
		}
	}
	slices.Sort(gateways)
	return routes, gateways
}

// LeafNodes counts the embedded server's leaf connections: a full
// node's from edges, an edge's to a full node; 0 without an embedded
// server.
func (ms *Mesh) LeafNodes() int {
	ms.mu.Lock()
	emb := ms.emb
	ms.mu.Unlock()
	if emb == nil {
		return 0
	}
	return emb.srv.NumLeafNodes()
}

// missingPeers reports whether a member's route or gateway is neither
// configured nor connected.
func (ms *Mesh) missingPeers() bool {
	ms.mu.Lock()
	emb := ms.emb
	ms.mu.Unlock()
	if emb == nil {
		return false
	}
	connected := map[string]bool{}
	if rz, err := emb.srv.Routez(nil); err == nil {
		for _, r := range rz.Routes {
			connected[r.RemoteName] = true
		}
	}
	l := ms.wanted()
	if len(l.hubs) > 0 && emb.srv.NumLeafNodes() == 0 && !slices.Equal(l.hubs, emb.hubs) {
		return true // an edge not connected, and full nodes it was not told of
	}
	for name := range l.routes {
		if _, ok := emb.routes[name]; !ok && !connected[name] {
			return true
		}
	}
	gz, err := emb.srv.Gatewayz(nil)
	if err != nil {
		return false
	}
	for region := range l.gateways {
		_, out := gz.OutboundGateways[region]
		_, in := gz.InboundGateways[region]
		if _, ok := emb.gateways[region]; !ok && !out && !in {
			return true
		}
	}
	return false
}

func (ms *Mesh) restartEmbedded() {
	l := ms.wanted()
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.log.Info("restarting embedded nats to reach new peers", "routes", len(l.routes), "gateways", len(l.gateways), "leaf_hubs", len(l.hubs))
	ms.emb.shutdown()
	emb, err := ms.startEmbedded(l)
	if err != nil {
		ms.log.Error("embedded nats restart failed; retrying at the next check", "err", err)
		ms.emb = &embedded{srv: ms.emb.srv, links: links{routes: map[string]string{}, gateways: map[string]string{}}}
		return
	}
	ms.emb = emb
	ms.m.restarts.Inc()
}
