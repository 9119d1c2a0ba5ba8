package ids

import (
	"crypto/sha256"
	"encoding/binary"
)

// Hash is the keyed 64-bit hash the voter state holds ids by (a ballot's
// voter and idempotency key): the first 8 bytes of SHA-256(key ‖ id).
func Hash(key []byte, id string) uint64 {
	h := sha256.New()
	h.Write(key)
	h.Write([]byte(id))
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}

// ClusterHashKey is the hash key of a cluster's nodes: derived from the
// cluster name, so every node, and an auditor naming quiz participants as
// leaderboards do, uses the same one.
func ClusterHashKey(cluster string) []byte { return []byte("tally ballot hash v1 " + cluster) }
