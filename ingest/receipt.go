package ingest

import (
	"encoding/hex"
	"runtime"
	"sync"

	"tally/api"
	"tally/ledger"
	"tally/receipt"
)

// unsigned is the receipt of a record this replica ledgered, to be
// signed (signReceipts) once the request's locks are let go: the voter's
// evidence that this node took it (package receipt). Nil when the
// pipeline signs none (Config.SignReceipt).
func unsigned(sign func([]byte) []byte, r *ledger.Record) *receipt.Receipt {
	if sign == nil {
		return nil
	}
	leaf := r.Hash()
	return &receipt.Receipt{Poll: r.Poll, VoteID: r.ID().String(), Stamp: api.FormatStamp(r.Wall, r.Logical), Leaf: hex.EncodeToString(leaf[:])}
}

// signReceipts signs the receipts the results carry unsigned. A
// signature is most of a receipt's cost (about 27 µs, BENCHMARKS.md
// "Receipts"): a relayed batch's are signed on every core.
func signReceipts(sign func([]byte) []byte, results ...[]Result) {
	var todo []*receipt.Receipt
	for _, rs := range results {
		for i := range rs {
			if rc := rs[i].Receipt; rc != nil && rc.Sig == nil {
				todo = append(todo, rc)
			}
		}
	}
	if sign == nil || len(todo) == 0 {
		return
	}
	parts := 1
	if len(todo) >= 8 {
		parts = min(runtime.GOMAXPROCS(0), len(todo)/4)
	}
	var wg sync.WaitGroup
	for k := range parts {
		wg.Go(func() {
			for _, rc := range todo[k*len(todo)/parts : (k+1)*len(todo)/parts] {
				rc.Sig = sign(rc.SigningBytes())
			}
		})
	}
	wg.Wait()
}

// retryReceipt is the receipt of the record a retry is answered with,
// when this replica ledgered it (a first answer lost on the way is the
// usual reason for a retry, and its receipt with it): read back from the
// ledger. Nil when another replica did (only it can sign), or the record
// cannot be read; the retry's answer stands without it.
func retryReceipt(cfg *Config, pollID string, id ledger.VoteID) *receipt.Receipt {
	if cfg.SignReceipt == nil || id.Replica != cfg.Ledger.Replica() || id.Seq == 0 {
		return nil
	}
	for r, err := range cfg.Ledger.ScanAfter(pollID, id.Replica, id.Seq-1) {
		if err != nil || r.Seq != id.Seq {
			return nil
		}
		rc := unsigned(cfg.SignReceipt, &r)
		rc.Sig = cfg.SignReceipt(rc.SigningBytes())
		return rc
	}
	return nil
}
