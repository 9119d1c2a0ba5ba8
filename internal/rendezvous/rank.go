package rendezvous

import (
	"cmp"
	"hash/fnv"
	"slices"
)

// Rank returns nodes ordered by their score for key, highest first, ties
// by name. It does not modify nodes.
func Rank(key string, nodes []string) []string {
	type scored struct {
		node  string
		score uint64
	}
	s := make([]scored, len(nodes))
	for i, n := range nodes {
		s[i] = scored{n, Score(key, n)}
	}
	slices.SortFunc(s, func(a, b scored) int { return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.node, b.node)) })
	out := make([]string, len(s))
	for i := range s {
		out[i] = s[i].node
	}
	return out
}

// Score is node's weight for key: FNV-1a over node, a zero byte and key,
// through SplitMix64's finalizer (FNV's low bits alone rank poorly). It
// is not keyed: anyone can compute where a key goes.
func Score(key, node string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(node))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return mix(h.Sum64())
}

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}
