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
// Every message carries the sender's hybrid logical clock, which the
// receiver folds into its own (a clock too far ahead is refused, and its
// message dropped). Messages are decoded strictly; anything malformed is
// dropped and counted, never merged.
//
// The package imports state, crdt, poll, hlc and ids of this module.
package gossip
