// Package merkle is the Merkle tree a certificate's records make (issue
// 62, in progress): a binary hash tree with RFC 9162's hashing
// (Certificate Transparency v2) over the records' hashes
// (ledger.Record.Hash: SHA-256 of the canonical encoding, as the chains
// link them), in the order given. A leaf's node is SHA-256(0x00 ‖ record
// hash), an inner node SHA-256(0x01 ‖ left ‖ right). Its root commits to
// every record at once; an inclusion proof (the audit path) shows that
// one record is under the root with log2(n) sibling hashes, which reveal
// nothing of the other records.
//
// The hashing, the proof's shape and its verification are
// github.com/transparency-dev/merkle's (the CT ecosystem's own code),
// not written here: an auditor's verifier and this one agree by
// construction. It imports nothing of Tally's.
package merkle
