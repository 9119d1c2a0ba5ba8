package node

import (
	"cmp"
	"net/http"

	"tally/api"
)

// handleCluster serves GET /v1/cluster: members as memberlist sees them,
// every replica heard from and how stale its newest state is.
func (n *Node) handleCluster(w http.ResponseWriter, r *http.Request) {
	routes, gateways := n.gossip.Mesh().Links()
	if gateways == nil {
		gateways = []string{}
	}
	members := n.gossip.Members()
	view := api.ClusterView{
		Self: n.cfg.NodeName, Region: n.cfg.Region, Replica: n.replica, Role: n.cfg.Role,
		Members: members, Replicas: n.gossip.Staleness(), Regions: n.freshness(),
		NATS: &api.ClusterNATS{Connected: n.gossip.Mesh().Connected(), Embedded: n.cfg.NATSURL == "", Routes: routes, Gateways: gateways, LeafNodes: n.gossip.Mesh().LeafNodes()},
	}
	if n.edge != nil {
		view.RelaysTo, view.NATS.LeafHub = relayTargets(n, members)
	}
	api.WriteJSON(w, r, http.StatusOK, view)
}

// relayTargets is an edge's relays_to and leaf_hub, named as the
// membership names them.
func relayTargets(n *Node, members []api.ClusterMember) ([]api.ClusterTarget, *api.ClusterTarget) {
	byReplica, byName := map[string]api.ClusterMember{}, map[string]api.ClusterMember{}
	for _, m := range members {
		byReplica[m.Replica], byName[m.Name] = m, m
	}
	var to []api.ClusterTarget
	for _, t := range n.edge.Targets() {
		m := byReplica[t.Replica]
		to = append(to, api.ClusterTarget{Node: m.Name, Replica: t.Replica, Region: cmp.Or(t.Region, m.Region)})
	}
	name := n.gossip.Mesh().LeafHub()
	if name == "" {
		return to, nil
	}
	m := byName[name]
	return to, &api.ClusterTarget{Node: name, Replica: m.Replica, Region: m.Region}
}

// handlePublicCluster serves GET /v1/cluster on the public port when
// --admin-addr is set: the region and the freshness vector the page shows,
// nothing about members or addresses.
func (n *Node) handlePublicCluster(w http.ResponseWriter, r *http.Request) {
	api.WriteJSON(w, r, http.StatusOK, api.ClusterView{Region: n.cfg.Region, Regions: n.freshness()})
}

// freshness is the per-region freshness vector: for each region, the age
// in ms of the newest state heard from any of its replicas (this node's
// region: 0).
func (n *Node) freshness() map[string]int64 {
	out := map[string]int64{}
	for _, r := range n.gossip.Staleness() {
		if cur, ok := out[r.Region]; !ok || r.StalenessMs < cur {
			out[r.Region] = r.StalenessMs
		}
	}
	return out
}

// refuseOnEdge answers requests an edge node does not take.
func refuseOnEdge(w http.ResponseWriter, r *http.Request) {
	api.WriteError(w, r, api.Errorf(http.StatusMisdirectedRequest, api.CodeEdgeNode,
		"this is an edge node: it serves viewers only; send %s %s to a full node", r.Method, r.URL.Path))
}
