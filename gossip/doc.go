// Package gossip spreads a node's replicated state to the other nodes of
// the cluster, over two paths that both merge idempotently:
//
//   - memberlist (hashicorp/memberlist) keeps the membership: who is in the
//     cluster, in which region, with which replica id, HTTP address, role
//     and NATS addresses (the node metadata). Its periodic push/pull
//     exchanges the full state (every poll's definition and every
//     replica's counters) between two random nodes: the anti-entropy path,
//     slow but certain, which also hands a joining node everything.
//   - NATS (nats-io/nats.go) is the fast path: every PublishEvery (100 ms)
//     each node publishes the entries of its own replica that changed,
//     and any definition it wrote, on one subject per cluster, and merges
//     what the others publish. Without --nats-url the node runs an
//     embedded nats-server whose routes (same region) and gateways (other
//     regions) come from the memberlist metadata, so --join alone is
//     enough.
//
// Gossip holds the membership and the protocol; three types own the rest:
// Mesh (nats.go) the NATS side — the embedded server, its links kept
// reaching every member, and the one connection that gossip, catch-up and
// the edge relay share (the relay borrows it through Gossip.Mesh().Conn
// and never closes it); catchUp (catchup.go) the ballots a node missed
// while away, fetched over NATS or memberlist; known (known.go) the
// members kept across restarts. The cluster's keys and seals are the
// keyring (seal.go).
//
// Every message carries the sender's hybrid logical clock, which the
// receiver folds into its own (a clock too far ahead is refused, and its
// message dropped). Messages are decoded strictly; anything malformed is
// dropped and counted, never merged.
//
// The package imports api, crdt, hlc, ids, internal/wire, poll and state
// of this module.
package gossip
