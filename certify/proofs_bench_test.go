package certify

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"tally/api"
	"tally/ledger"
	"tally/state"
)

// millionChains is three replicas' chains of 1,000,000 records in all,
// linked and hashed as a certifier's copies hold them (KeepHash).
func millionChains(b *testing.B) [][]*ledger.Record {
	b.Helper()
	var chains [][]*ledger.Record
	for k, rep := range []string{"ap-1", "eu-1", "us-1"} {
		n := 333_333 + map[bool]int{true: 1}[k == 0]
		recs := make([]*ledger.Record, n)
		var prev ledger.Hash
		for i := range recs {
			v := fmt.Sprintf("%s-voter-%d", rep, i)
			r := &ledger.Record{Poll: "p", Replica: rep, Seq: uint64(i + 1), Wall: 1_796_000_000_000 + int64(i), Voter: v, Option: "a", Idem: v,
				Trust: 1, Counted: true, IPHash: "00112233445566778899aabbccddeeff", Prev: prev}
			prev = r.KeepHash()
			recs[i] = r
		}
		chains = append(chains, recs)
	}
	return chains
}

// millionReconciled is millionChains reconciled, and a certifier that
// signs with a key of its own.
func millionReconciled(b *testing.B) (*Certifier, [][]*ledger.Record, *ledger.Result) {
	chains := millionChains(b)
	_, key, _ := ed25519.GenerateKey(nil)
	c := &Certifier{cfg: Config{Replica: "eu-1", Sign: func(m []byte) []byte { return ed25519.Sign(key, m) }}}
	res, err := ledger.ReconcileChains(ledger.ReconcileConfig{Poll: "p"}, chains...)
	if err != nil {
		b.Fatal(err)
	}
	return c, chains, res
}

// BenchmarkTreeHeadMillion is what the tree adds to the certification
// of 1,000,000 votes: the leaves (each chain checked against the one the
// result names), the tree and the signed head.
func BenchmarkTreeHeadMillion(b *testing.B) {
	c, chains, res := millionReconciled(b)
	for b.Loop() {
		if _, err := c.signTreeHead("p", chains, res); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProofMillion is one voter's proof of a certified poll of
// 1,000,000 votes, once its index is built (reported apart: the first
// proof asked waits for it), and its check as a voter's client makes it.
func BenchmarkProofMillion(b *testing.B) {
	c, chains, res := millionReconciled(b)
	head, err := c.signTreeHead("p", chains, res)
	if err != nil {
		b.Fatal(err)
	}
	detail, _ := jsonOf(api.ResultDetail{Result: res, Tree: head})
	cert := state.Certificate{Poll: "p", Status: state.Reconciled, Detail: detail}
	start := time.Now()
	idx, err := buildIndex("p", cert, *head, 0, chains)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("the index of 1,000,000 records: built in %v", time.Since(start).Round(time.Millisecond))
	var bytes int
	i := 0
	for b.Loop() {
		p, err := idx.proof(int(idx.leaves[idx.disp.Records[(i*977)%1_000_000].KeepHash()]), true)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := jsonOf(p)
		bytes = len(body)
		i++
	}
	b.ReportMetric(float64(bytes), "proof-bytes")
}

func jsonOf(v any) ([]byte, error) { return json.Marshal(v) }
