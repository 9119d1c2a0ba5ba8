// Package buddy keeps every acknowledged vote on two machines. A full
// node's ledger (package ledger, Config.Copier) hands each synced batch
// of its own records to a Sender, which sends them, sealed, as one NATS
// request to the node's buddy — another full node, its own region's
// first (Rank) — and returns once the buddy's Store has fsynced them.
// Only then are the votes acknowledged.
//
// The Store is a second Pebble ledger on the buddy that only imports: it
// checks each replica's records continue the chain it holds (sequence
// numbers without gaps, each record linking the hash of the one before),
// so a copy is exactly the replica's chain, and it survives the buddy's
// restarts. Each request also carries the sender's signed head of each of
// its chains (ledger.SignedHead, with the key the replica announces),
// stored in the same batch and fsync as the records: the copy is vouched
// for by the replica itself up to every acknowledged vote, and
// certification from it checks that head (Store.Copy). A buddy that is behind (a new buddy, one that lost its disk)
// answers with the heads it holds, and the Sender first sends what it
// lacks from its own ledger: a copy acknowledged is the whole chain up to
// that vote. Certification reads a replica's chain from its buddy's copy
// when the replica itself is gone (Store.Records).
//
// While no buddy answers, Copy fails and the ledger returns
// ledger.ErrNotCopied; with Degrade set it acknowledges with one copy
// instead, and counts and logs each such vote.
//
// It imports ids, internal/rendezvous, internal/wire and ledger of this
// module, NATS and Prometheus.
package buddy
