// Package ledger is Tally's durable, append-only vote ledger on Pebble.
//
// Every vote a node accepts becomes a Record. Records of one replica for one
// poll form a hash chain: each carries a per-(poll, replica) sequence number
// starting at 1 and the SHA-256 of the previous record, so an export can be
// checked for gaps, reordering and tampering, and its length compared with
// the record count that the replica gossiped.
//
// Append commits with pebble.Sync before it returns. Concurrent appends are
// coalesced by one committer goroutine into shared batches, and batches are
// pipelined into Pebble's WAL so several share one fsync. The idempotency
// index (poll, idem) → vote id is written in the same batch as the record,
// and the committer checks it, so a retry can never be appended twice.
//
// Reconcile is the exact merge of any number of replicas' record streams
// into a certified Result with a digest; it is a pure function of the
// records, independent of stream and record order. A Certificate is what
// a poll's certification wrote of such a Result (or why it is pending),
// signed by the certifying replica; package state replicates it.
//
// A SignedHead is a replica's Ed25519 signature over its chain's last
// record: it ends the replica's NDJSON exports, and a buddy's copy keeps
// one with the records it covers (ImportSigned, in the same batch), which
// the copy's export hands over (WriteStreamHead, WriteSignedHead).
//
// A Ledger is safe for concurrent use. Close stops the committer after it
// has finished the batches in flight. The package knows nothing of HTTP,
// gossip or WebSocket; it imports only hlc, ids and internal/wire of this
// module.
package ledger
