package receipt

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"tally/ledger"
	"tally/merkle"
)

// BenchmarkVerifyMillion is a voter's check of their receipt against the
// proof of a vote in a certified poll of 1,000,000 records (an audit path
// of 20 hashes): two Ed25519 signatures (the receipt's, the tree head's),
// the record's hash and decoding, the path from its leaf (the hash and
// its disposition).
func BenchmarkVerifyMillion(b *testing.B) {
	const size = 1_000_000
	key := testKey("eu-1")
	rec := ledger.Record{Poll: "p", Replica: "eu-1", Seq: 1, Wall: 1_796_000_000_000, Voter: "0f8fad5b-d9cb-469f-a165-70867728950e",
		Option: "a", Idem: "7c9e6679-7425-40de-944b-e07fc1f90ae7", Trust: 1, Counted: true, IPHash: "00112233445566778899aabbccddeeff"}
	leaf := rec.Hash()
	d, err := ledger.DisposeChains(ledger.ReconcileConfig{Poll: "p"}, []*ledger.Record{&rec})
	if err != nil || d.Of[0] != ledger.DispCounted {
		b.Fatalf("the record is %v under the rules (%v)", d, err)
	}
	leaves := make([]merkle.Leaf, size) // the others: any leaves
	leaves[0] = merkle.LeafOf(leaf, byte(d.Of[0]))
	for i := 1; i < size; i++ {
		leaves[i] = merkle.LeafOf(sha256.Sum256([]byte{byte(i), byte(i >> 8), byte(i >> 16)}), byte(1+i%5))
	}
	tree := merkle.New(leaves)
	root := tree.Root()
	path, _ := tree.Proof(0)
	head := TreeHead{Poll: "p", Size: size, Root: hex.EncodeToString(root[:]), Digest: hex.EncodeToString(root[:]), By: "eu-1"}
	head.Sign(key)
	r := Receipt{Poll: "p", VoteID: "eu-1/1", Stamp: "1796000000000.0", Leaf: leaf.String()}
	r.Sign(key)
	p := Proof{Leaf: r.Leaf, Record: rec.AppendBinary(nil), Vote: VoteOf(&rec), Disposition: Counted, TreeHead: &head}
	for _, h := range path {
		p.Path = append(p.Path, hex.EncodeToString(h[:]))
	}
	keys := func(string) ed25519.PublicKey { return key.Public().(ed25519.PublicKey) }
	for b.Loop() {
		if _, err := Verify(r, p, keys); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAnswerJSON is what a receipt adds to a vote's answer: its
// bytes in the JSON (the answer's own are reported by api's benchmark)
// and their encoding.
func BenchmarkAnswerJSON(b *testing.B) {
	key := testKey("eu-1")
	r := Receipt{Poll: "final-vote-2026", VoteID: "eu-west-3f9c2a10/123456", Stamp: "1796040005000.12",
		Leaf: "9c1e6a3f0d5b7e2c4a8f1b3d5e7c9a0b2d4f6e8a1c3e5b7d9f0a2c4e6b8d0f1a"}
	r.Sign(key)
	buf := make([]byte, 0, 512)
	for b.Loop() {
		buf = r.AppendJSON(buf[:0])
	}
	b.ReportMetric(float64(len(buf)), "bytes")
}

// BenchmarkSignFloor is the floor of a receipt's cost at the full node:
// a bare ed25519.Sign of a receipt's signing bytes, in the same run as
// BenchmarkAnswerJSON (bench/receipts.sh puts ingest's VoteBatch votes
// and receipts beside it).
func BenchmarkSignFloor(b *testing.B) {
	key := testKey("eu-1")
	r := Receipt{Poll: "final-vote-2026", VoteID: "eu-west-3f9c2a10/123456", Stamp: "1796040005000.12",
		Leaf: "9c1e6a3f0d5b7e2c4a8f1b3d5e7c9a0b2d4f6e8a1c3e5b7d9f0a2c4e6b8d0f1a"}
	msg := r.SigningBytes()
	for b.Loop() {
		ed25519.Sign(key, msg)
	}
}
