package api

// ClusterView is GET /v1/cluster. On the admin address (or a node without
// --admin-addr) it is whole; on the public port of a node with
// --admin-addr it holds only Region and Regions (Self is "").
type ClusterView struct {
	Self     string           `json:"self,omitempty"`
	Region   string           `json:"region"`
	Replica  string           `json:"replica,omitempty"`
	Role     string           `json:"role,omitempty"`
	Members  []ClusterMember  `json:"members,omitempty"`
	Replicas []ClusterReplica `json:"replicas,omitempty"`
	// Regions: per region, the staleness of its freshest replica (ms).
	Regions map[string]int64 `json:"regions"`
	NATS    *ClusterNATS     `json:"nats,omitempty"`
	// RelaysTo: at an edge, the full nodes it relays votes to now — those
	// of its region it heard ready within the last second, else the
	// other regions' (a request goes to the one its voter ranks first).
	RelaysTo []ClusterTarget `json:"relays_to,omitempty"`
}

// ClusterTarget is a full node an edge relays to, or its NATS leaf
// connection is on.
type ClusterTarget struct {
	Node    string `json:"node,omitempty"`
	Replica string `json:"replica,omitempty"`
	Region  string `json:"region"`
}

// ClusterMember is a member of the cluster as memberlist sees it.
type ClusterMember struct {
	Name     string `json:"name"`
	Region   string `json:"region"`
	Replica  string `json:"replica"`
	Role     string `json:"role"`
	HTTPAddr string `json:"http_addr,omitempty"`
	HTTPS    bool   `json:"https,omitempty"`
	// AdminAddr is the member's --admin-addr (the same TLS as HTTPAddr),
	// where its whole GET /v1/cluster is; absent without one, and for a
	// member of a release before it.
	AdminAddr string `json:"admin_addr,omitempty"`
	// Protocol is the cluster protocol the member speaks (1 for a member
	// of a release before v0.5.0, which states none), and Release its
	// build version where it states one: during a rolling upgrade, who
	// runs what.
	Protocol int    `json:"protocol"`
	Release  string `json:"release,omitempty"`
	Gossip   string `json:"gossip_addr"`
	State    string `json:"state"` // alive (dead and departed members are dropped)
	Self     bool   `json:"self"`
}

// ClusterReplica is a replica heard from and the age of its newest state.
type ClusterReplica struct {
	Replica     string `json:"replica"`
	Region      string `json:"region"`
	StalenessMs int64  `json:"staleness_ms"`
	Self        bool   `json:"self,omitempty"`
}

// ClusterNATS is this node's NATS connection and links.
type ClusterNATS struct {
	Connected bool     `json:"connected"`
	Embedded  bool     `json:"embedded"`
	Routes    int      `json:"routes"`
	Gateways  []string `json:"gateways"`
	// LeafNodes counts leaf connections: a full node's from its edges, an
	// edge's (0 or 1) to a full node.
	LeafNodes int `json:"leaf_nodes"`
	// LeafHub: at an edge, the full node its leaf connection is on (all
	// it relays and hears goes through it); absent while it has none.
	LeafHub *ClusterTarget `json:"leaf_hub,omitempty"`
}

// ClusterKeys is the body of GET /v1/cluster/keys: the Ed25519 public key
// of every replica this node knows, by which its certificates, signed
// chain heads and copies are verified.
type ClusterKeys struct {
	Keys []ReplicaKey `json:"keys"`
}

// ReplicaKey is one replica's public key, standard base64.
type ReplicaKey struct {
	Replica   string `json:"replica"`
	PublicKey []byte `json:"public_key"`
}
