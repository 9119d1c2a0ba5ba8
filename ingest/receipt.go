package ingest

import (
	"encoding/hex"

	"tally/api"
	"tally/ledger"
	"tally/receipt"
)

// receiptOf signs a receipt for a record this replica ledgered: the
// voter's evidence that this node took it (package receipt). Nil when
// the pipeline signs none (Config.SignReceipt).
func receiptOf(sign func([]byte) []byte, r *ledger.Record) *receipt.Receipt {
	if sign == nil {
		return nil
	}
	leaf := r.Hash()
	rc := &receipt.Receipt{Poll: r.Poll, VoteID: r.ID().String(), Stamp: api.FormatStamp(r.Wall, r.Logical), Leaf: hex.EncodeToString(leaf[:])}
	rc.Sig = sign(rc.SigningBytes())
	return rc
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
		return receiptOf(cfg.SignReceipt, &r)
	}
	return nil
}
