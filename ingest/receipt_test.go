package ingest

import (
	"crypto/ed25519"
	"fmt"
	"testing"
	"time"

	"tally/api"
	"tally/poll"
	"tally/receipt"
)

// Every accepted vote's answer carries a receipt signed by the replica's
// key whose leaf is the hash of the record the ledger holds; a retry of
// it at this node is answered with the same receipt (its first answer
// may have been lost), and a pipeline without a signer writes none.
func TestReceiptsOfVotesAndRetries(t *testing.T) {
	r := newRig(t, t.TempDir())
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Ledger: r.l, State: r.st, Clock: r.p.cfg.Clock, Limits: Limits{MaxBody: 1 << 14},
		SignReceipt: func(msg []byte) []byte { return ed25519.Sign(key, msg) }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Submit("p", []Vote{{Voter: "v1", Option: "a", Idem: "k1"}, {Voter: "v2", Option: "b", Idem: "k2"}}, "203.0.113.7")
	if err != nil {
		t.Fatal(err)
	}
	leaves := map[string]string{} // vote id → leaf, from the ledger
	for rec, err := range r.l.Scan("p") {
		if err != nil {
			t.Fatal(err)
		}
		h := rec.Hash()
		leaves[rec.ID().String()] = h.String()
	}
	for i, v := range res {
		rc := v.Receipt
		if v.Status != StatusAccepted || rc == nil {
			t.Fatalf("vote %d: %+v", i, v)
		}
		if err := rc.Verify(pub); err != nil {
			t.Fatalf("vote %d: %v", i, err)
		}
		if rc.Poll != "p" || rc.VoteID != v.VoteID || rc.Stamp != v.Stamp || rc.Leaf != leaves[v.VoteID] {
			t.Fatalf("vote %d: receipt %+v, answer %+v, ledger leaf %s", i, rc, v, leaves[v.VoteID])
		}
		if err := rc.Verify(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize))); err == nil {
			t.Fatalf("vote %d: a receipt verifies with another key", i)
		}
	}
	again, err := p.Submit("p", []Vote{{Voter: "v1", Option: "a", Idem: "k1"}}, "203.0.113.7")
	if err != nil || again[0].Status != StatusDuplicate || again[0].Receipt == nil {
		t.Fatalf("the retry: %+v %v", again, err)
	}
	if a, b := *again[0].Receipt, *res[0].Receipt; a.Leaf != b.Leaf || a.VoteID != b.VoteID || a.Stamp != b.Stamp || a.Verify(pub) != nil {
		t.Fatalf("the retry's receipt %+v, the vote's %+v", a, b)
	}
	if _, err := receipt.Decode(res[1].Receipt.AppendJSON(nil)); err != nil {
		t.Fatalf("the receipt as the answer writes it: %v", err)
	}

	plain, err := r.p.Submit("p", []Vote{{Voter: "v3", Option: "c", Idem: "k3"}}, "203.0.113.8")
	if err != nil || plain[0].Status != StatusAccepted || plain[0].Receipt != nil {
		t.Fatalf("a pipeline without a signer: %+v %v", plain, err)
	}
}

// A quiz answer's answer carries its receipt too, and a relayed batch's
// votes each theirs, signed once the batch is answered.
func TestReceiptsOfQuizAnswersAndBatches(t *testing.T) {
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	p, _ := quizPipeline(t, now, time.Second, nil, poll.Definition{ID: "p", Question: "P?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: now.Add(-time.Minute).UnixMilli(), ClosesAt: now.Add(time.Hour).UnixMilli()})
	pub, key, _ := ed25519.GenerateKey(nil)
	p.cfg.SignReceipt = func(m []byte) []byte { return ed25519.Sign(key, m) }
	res, err := p.SubmitFrom("q-1", []Vote{{Option: "a", Voter: "ann", Idem: "ann-q"}}, Client{Sender: api.Sender{IP: "192.0.2.1", SocketAge: time.Second, RTTMs: -1}, TokenAge: -1})
	if err != nil || res[0].Receipt == nil || res[0].Receipt.Verify(pub) != nil || res[0].Receipt.Poll != "q-1" {
		t.Fatalf("a quiz answer: %+v %v", res, err)
	}
	var reqs []Request
	for i := range 20 {
		v := fmt.Sprintf("v%d", i)
		reqs = append(reqs, Request{Votes: []Vote{{Option: "b", Voter: v, Idem: v}}, Sender: api.HTTPSender("192.0.2.9", "phone", "", 0)})
	}
	for i, r := range p.VoteBatch("p", reqs) {
		rc := r.Response.Results[0].Receipt
		if r.Err != nil || rc == nil || rc.Verify(pub) != nil || rc.VoteID != r.Response.Results[0].VoteID {
			t.Fatalf("request %d of a batch: %+v %v", i, r, r.Err)
		}
	}
}
