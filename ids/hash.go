package ids

import (
	"crypto/sha256"
	"encoding/binary"
)

// Hash is the keyed 64-bit hash the voter state holds ids by (a ballot's
// voter and idempotency key): the first 8 bytes of SHA-256(key ‖ id).
func Hash(key []byte, id string) uint64 {
	// Key and id in one buffer on the stack (ids are at most MaxLen
	// bytes), hashed with Sum256: no digest on the heap. It is taken per
	// vote for the voter and the key.
	var buf [256]byte
	b := append(append(buf[:0], key...), id...)
	sum := sha256.Sum256(b)
	return binary.BigEndian.Uint64(sum[:])
}

// ClusterHashKey is the hash key of a cluster's nodes: derived from the
// cluster name, so every node, and an auditor naming quiz participants as
// leaderboards do, uses the same one.
func ClusterHashKey(cluster string) []byte { return []byte("tally ballot hash v1 " + cluster) }
