// Package receipt is a voter's evidence and its check (docs/auditing.md,
// "Receipts").
//
// A Receipt comes with every accepted vote: the poll, the vote id, the
// stamp, the leaf (the hash of the ledger record: what the certificate's
// Merkle tree, package merkle, is built over), and the ledgering
// replica's Ed25519 signature over them, with the key that signs its
// chain heads (published at GET /v1/cluster/keys). It is small (under
// 300 bytes as JSON) and names the voter's option to nobody: the leaf is
// a hash.
//
// A TreeHead is a certified poll's signed tree head: the size and root
// of the tree over every record the certificate counted from, signed by
// the certifier; a leaf is a record's hash and its disposition's byte
// (DispositionCode), so the root commits to what became of each. A Proof (GET /v1/polls/{poll}/proofs/{leaf}) is one
// record, its audit path, what became of it (counted, superseded, late,
// duplicate, filtered) and the tree head; Verify checks a receipt against
// one, naming the step that failed. It imports ids, ledger and merkle.
package receipt
