// Package receipt is a voter's evidence that a named node took their vote
// (issue 62, in progress; nothing issues receipts yet): the poll, the vote
// id, the stamp, the leaf (the hash of the ledger record: what the
// certificate's Merkle tree, package merkle, is built over), and the
// ledgering replica's Ed25519 signature over them, with the key that
// signs its chain heads (published at GET /v1/cluster/keys). A receipt is
// small (under 300 bytes as JSON) and shows the voter's own option to
// nobody: the leaf is a hash. It imports ids only.
package receipt
