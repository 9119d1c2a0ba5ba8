package certify

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"tally/api"
	"tally/ledger"
	"tally/receipt"
	"tally/state"
)

// proofRig is a prefetchRig whose replicas hold every kind of record a
// proof tells of, each with the receipt its replica signed, and whose
// certifier signs with eu-1's key.
type proofRig struct {
	*prefetchRig
	keys     map[string]ed25519.PrivateKey
	receipts map[string]receipt.Receipt // voter/idem → its record's receipt
}

func newProofRig(t *testing.T) *proofRig {
	t.Helper()
	r := &proofRig{prefetchRig: newPrefetchRig(t, 0), keys: map[string]ed25519.PrivateKey{}, receipts: map[string]receipt.Receipt{}}
	for _, rep := range []string{"eu-1", "us-1", "ap-1"} {
		_, key, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		r.keys[rep] = key
		if err := r.st.Defs.LearnKey(rep, key.Public().(ed25519.PublicKey)); err != nil {
			t.Fatal(err)
		}
	}
	r.c.cfg.Sign = func(b []byte) []byte { return ed25519.Sign(r.keys["eu-1"], b) }
	at := func(ms int64) int64 { return r.def.OpensAt + ms }
	r.add("eu-1", ledger.Record{Voter: "ann", Option: "a", Idem: "ann-1", Wall: at(10), Trust: 1, Counted: true}) // superseded
	r.add("us-1", ledger.Record{Voter: "ann", Option: "b", Idem: "ann-2", Wall: at(20), Trust: 1, Counted: true}) // counted
	r.add("ap-1", ledger.Record{Voter: "bob", Option: "a", Idem: "bob-1", Wall: at(30), Trust: 1, Counted: true}) // counted
	r.add("eu-1", ledger.Record{Voter: "bob", Option: "a", Idem: "bob-1", Wall: at(40), Trust: 1, Counted: true}) // its retry elsewhere: duplicate
	r.add("us-1", ledger.Record{Voter: "cat", Option: "a", Idem: "cat-1", Wall: at(50), Trust: 0.1})              // filtered
	r.add("ap-1", ledger.Record{Voter: "dan", Option: "b", Idem: "dan-1", Wall: at(60), Trust: 1, Late: true})    // late
	r.add("eu-1", ledger.Record{Voter: "eve", Option: "b", Idem: "ann-2", Wall: at(70), Trust: 1, Counted: true}) // another voter's key: duplicate
	r.vote("us-1", 3, "a")
	r.now = time.UnixMilli(r.def.GraceEnd() + 1)
	return r
}

// add ledgers rec at replica and keeps the receipt the replica signs.
func (r *proofRig) add(replica string, rec ledger.Record) {
	r.t.Helper()
	rec.Poll = "p"
	if _, err := r.ledgers[replica].Append(rec); err != nil {
		r.t.Fatal(err)
	}
	n, _, _ := r.ledgers[replica].Head("p", replica)
	for got, err := range r.ledgers[replica].ScanAfter("p", replica, n-1) {
		if err != nil {
			r.t.Fatal(err)
		}
		leaf := got.Hash()
		rc := receipt.Receipt{Poll: "p", VoteID: got.ID().String(), Stamp: api.FormatStamp(got.Wall, got.Logical), Leaf: hex.EncodeToString(leaf[:])}
		rc.Sign(r.keys[replica])
		r.receipts[rec.Voter+"/"+rec.Idem] = rc // the last one of a key
		r.receipts[replica+":"+rec.Voter+"/"+rec.Idem] = rc
	}
	r.setCount(replica)
}

func (r *proofRig) keyOf(replica string) ed25519.PublicKey {
	if k, ok := r.keys[replica]; ok {
		return k.Public().(ed25519.PublicKey)
	}
	return nil
}

// ask is the proof of leaf as the node answers it.
func (r *proofRig) ask(leaf string) (int, receipt.Proof, api.ErrorBody) {
	r.t.Helper()
	status, body := r.c.ProofAnswer(context.Background(), "p", leaf, false)
	var p receipt.Proof
	var e api.ErrorBody
	if status == http.StatusOK {
		var err error
		if p, err = receipt.DecodeProof(body); err != nil {
			r.t.Fatalf("%s: %v", body, err)
		}
	} else if err := json.Unmarshal(body, &e); err != nil {
		r.t.Fatalf("%d %s: %v", status, body, err)
	}
	return status, p, e
}

// A certified poll's certificate carries a signed tree head over all its
// records, and every record's proof checks against its receipt with what
// became of it: the counted and late ones, a change of mind pointing at
// the voter's counted vote, a filtered one, a retry elsewhere pointing at
// the record that stands, and another voter's reuse of a key pointing at
// nothing (it would show that voter's option). A node that did not
// certify reads the chains back and answers the same proofs.
func TestProofsOfACertifiedPoll(t *testing.T) {
	r := newProofRig(t)
	before, _, e := r.ask(r.receipts["ann/ann-1"].Leaf)
	if before != http.StatusConflict || e.Error.Code != api.CodeNotCertified {
		t.Fatalf("before certification: %d %+v", before, e)
	}
	cert, err := r.c.Certify(context.Background(), "p", Decisions{})
	if err != nil || cert.Status != state.Reconciled {
		t.Fatalf("%+v %v", cert, err)
	}
	head, err := treeHeadOf(cert)
	if err != nil || head.Verify(r.keyOf("eu-1")) != nil || head.Size != 10 || head.Digest != cert.Digest || head.By != "eu-1" {
		t.Fatalf("tree head %+v %v", head, err)
	}
	want := map[string]string{
		"ann/ann-1": receipt.Superseded, "ann/ann-2": receipt.Counted, "ap-1:bob/bob-1": receipt.Counted, "cat/cat-1": receipt.Filtered,
		"dan/dan-1": receipt.Late, "eve/ann-2": receipt.Duplicate,
	}
	check := func(when string) map[string]string {
		bodies := map[string]string{}
		for who, disp := range want {
			rc := r.receipts[who]
			status, p, e := r.ask(rc.Leaf)
			if status != http.StatusOK {
				t.Fatalf("%s: %s: %d %+v", when, who, status, e)
			}
			v, err := receipt.Verify(rc, p, r.keyOf)
			if err != nil || v.Disposition != disp {
				t.Fatalf("%s: %s: %+v %v", when, who, v, err)
			}
			switch who {
			case "ann/ann-1":
				if v.Counted == nil || v.Counted.Option != "b" {
					t.Fatalf("%s: a change of mind points at %+v", when, v.Counted)
				}
			case "eve/ann-2":
				if p.Counted != nil {
					t.Fatalf("%s: a duplicate of another voter's key shows that voter's record", when)
				}
			}
			b, _ := json.Marshal(p)
			bodies[who] = string(b)
		}
		return bodies
	}
	atCertifier := check("the certifier")
	bobsRetry := r.receipts["eu-1:bob/bob-1"]
	if status, p, _ := r.ask(bobsRetry.Leaf); status != http.StatusOK || p.Disposition != receipt.Duplicate || p.Counted == nil || p.Counted.Vote.VoteID != "ap-1/1" {
		t.Fatalf("bob's retry elsewhere: %d %+v", status, p)
	}
	r.c.proofs.forget("p")
	if again := check("another node"); !equalMaps(again, atCertifier) {
		t.Fatal("a node reading the chains back answers other proofs")
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Bad leaves are 400, unknown ones 404; a node whose replicas hand back
// records that do not make the certified tree answers no proof (503,
// and says why in its log) rather than one of another tree; a certificate
// of a release without trees is 409, saying so.
func TestProofRefusals(t *testing.T) {
	r := newProofRig(t)
	if _, err := r.c.Certify(context.Background(), "p", Decisions{}); err != nil {
		t.Fatal(err)
	}
	for _, leaf := range []string{"", "zz", strings.Repeat("A", 64), strings.Repeat("0", 63), strings.Repeat("0", 65), strings.Repeat("g", 64), "../result"} {
		if status, _, e := r.ask(leaf); status != http.StatusBadRequest || e.Error.Code != api.CodeInvalidRequest {
			t.Errorf("leaf %q: %d %+v", leaf, status, e)
		}
	}
	if status, _, e := r.ask(strings.Repeat("0", 64)); status != http.StatusNotFound || e.Error.Code != api.CodeLeafNotFound {
		t.Fatalf("an unknown leaf: %d %+v", status, e)
	}
	if status, body := r.c.ProofAnswer(context.Background(), "nope", strings.Repeat("0", 64), false); status != http.StatusNotFound {
		t.Fatalf("an unknown poll: %d %s", status, body)
	}

	// us-1's node now hands over another chain of the same length.
	r.c.proofs.forget("p")
	forged := r.ledgers["us-1"]
	r.ledgers["us-1"] = r.ledgers["ap-1"]
	status, _, e := r.ask(r.receipts["ann/ann-2"].Leaf)
	if status != http.StatusServiceUnavailable || e.Error.Code != api.CodeUnavailable {
		t.Fatalf("records that do not make the tree: %d %+v", status, e)
	}
	r.ledgers["us-1"] = forged
	if status, _, e := r.ask(r.receipts["ann/ann-2"].Leaf); status != http.StatusOK {
		t.Fatalf("once the chain is whole again: %d %+v", status, e)
	}

	for outcome, want := range map[string]float64{"invalid": 7, "leaf_not_found": 1, "refused": 1, "unavailable": 1, "proved": 1} {
		if got := testutil.ToFloat64(r.c.proofsM.WithLabelValues(outcome)); got != want {
			t.Errorf("tally_proofs_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	if got := testutil.ToFloat64(r.c.proofs.built.WithLabelValues("failed")); got != 1 {
		t.Errorf("failed index builds: %v, want 1", got)
	}

	cert, _ := r.st.Defs.Certificate("p")
	var d api.ResultDetail
	if err := json.Unmarshal(cert.Detail, &d); err != nil {
		t.Fatal(err)
	}
	d.Tree = nil
	cert.Detail, _ = json.Marshal(d)
	if _, err := treeHeadOf(cert); !isCode(err, api.CodeNotCertified) || !strings.Contains(err.Error(), "before v0.6.0") {
		t.Fatalf("a certificate without a tree: %v", err)
	}
}

func isCode(err error, code string) bool {
	var e *api.Error
	return errors.As(err, &e) && e.Code == code
}

// A node keeps the indexes of two polls: a proof of a third waits until
// one of them has gone a minute without a proof answered (503
// meanwhile; guessed leaves keep nothing), so proofs asked of many polls
// in turn do not rebuild index after index; the certifier's own new poll
// makes room at once.
func TestProofIndexesAreBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	ps := newProofs(func() time.Time { return now })
	for _, p := range []string{"a", "b"} {
		ps.indexes[p] = &proofIndex{}
		ps.asked[p] = now
		ps.touch(p)
	}
	read := func(context.Context) ([][]*ledger.Record, error) { return nil, errors.New("no chains here") }
	ask := func(poll string) error {
		_, err := ps.index(context.Background(), poll, state.Certificate{}, receipt.TreeHead{}, 0, read)
		return err
	}
	if err := ask("c"); !errors.Is(err, ErrProofsBusy) {
		t.Fatalf("a third poll while two are asked: %v", err)
	}
	now = now.Add(keepFor / 2)
	if err := ask("a"); err != nil { // a's proof is answered again: b is the oldest now
		t.Fatal(err)
	}
	ps.hit("a")
	if err := ask("b"); err != nil { // a guessed leaf of b (404): b is not kept for it
		t.Fatal(err)
	}
	now = now.Add(keepFor/2 + time.Second)
	if err := ask("c"); err == nil || errors.Is(err, ErrProofsBusy) {
		t.Fatalf("once b went a minute unasked, c's index is built (and fails here): %v", err)
	}
	if ps.indexes["b"] != nil || ps.indexes["a"] == nil {
		t.Fatalf("kept %v", ps.used)
	}
	ps.mu.Lock()
	ps.asked["a"] = now
	ps.indexes["c"] = &proofIndex{}
	ps.asked["c"] = now
	ps.touch("c")
	ps.mu.Unlock()
	ps.warm("d", state.Certificate{}, receipt.TreeHead{}, 0)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ps.indexes)+len(ps.building) > keptIndexes {
		t.Fatalf("after a warm build: %d kept, %d building", len(ps.indexes), len(ps.building))
	}
}
