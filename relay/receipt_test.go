package relay

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tally/api"
	"tally/internal/testnats"
	"tally/internal/testseal"
	"tally/receipt"
)

// signingNode is a fullNode whose votes come with receipts, signed with
// sampleKey as a full node signs them with its replica's key.
type signingNode struct{ *fullNode }

func (s signingNode) Votes(poll string, reqs []Request) []Answer {
	out := s.fullNode.Votes(poll, reqs)
	for _, a := range out {
		if a.Vote == nil {
			continue
		}
		for i := range a.Vote.Results {
			r := &a.Vote.Results[i]
			if r.VoteID == "" {
				continue
			}
			r.Stamp = "1796000000000." + r.VoteID[strings.IndexByte(r.VoteID, '/')+1:]
			r.Receipt = sampleReceipt(poll, r.VoteID, r.Stamp)
		}
	}
	return out
}

// A vote relayed through an edge gets its receipt: the same bytes as the
// full node's own answer would carry, over HTTP and on a socket, and it
// verifies with the full node's key.
func TestReceiptCrossesTheRelay(t *testing.T) {
	conn := testnats.Start(t)
	full := signingNode{&fullNode{name: "eu-1"}}
	startServer(t, conn(), full, "k")
	edge, _ := startEdge(t, conn(), "k", func(c *EdgeConfig) { c.Receipts = func() bool { return true } })

	// What the full node would have answered its own client.
	direct := signingNode{&fullNode{name: "eu-1"}}
	body := `{"option":"a","voter":"v1","idem":"k1"}`
	want := direct.Votes("p", []Request{{Kind: KindVote, Poll: "p", Votes: []api.Vote{{Option: "a", Voter: "v1", Idem: "k1"}}, Sender: api.Sender{IP: "198.51.100.9"}}})[0]

	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/polls/p/votes", strings.NewReader(body))
	req.SetPathValue("poll", "p")
	req.Header.Set("Content-Type", "application/json")
	edge.HandleVotes(rec, req)
	_, wantBody := want.JSON()
	if rec.Code != http.StatusOK || rec.Body.String() != string(wantBody) {
		t.Fatalf("through the edge: %d %s\nthe full node's: %s", rec.Code, rec.Body, wantBody)
	}
	var got api.VoteResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Results[0].Receipt == nil {
		t.Fatalf("no receipt in %s (%v)", rec.Body, err)
	}
	rc := got.Results[0].Receipt
	if err := rc.Verify(sampleKey.Public().(ed25519.PublicKey)); err != nil {
		t.Fatalf("the receipt through the edge does not verify: %v", err)
	}
	if !reflect.DeepEqual(rc, want.Vote.Results[0].Receipt) {
		t.Fatalf("receipt %+v, want %+v", rc, want.Vote.Results[0].Receipt)
	}

	// On a socket (fanout's Voter at an edge): the typed answer.
	v, err := edge.Vote("p", []byte(`{"option":"b","voter":"v2","idem":"k2"}`), api.Sender{IP: "203.0.113.7"})
	if err != nil || len(v.Results) != 1 || v.Results[0].Receipt == nil {
		t.Fatalf("socket vote: %+v, %v", v, err)
	}
	if rc := v.Results[0].Receipt; rc.Poll != "p" || rc.VoteID != v.Results[0].VoteID || rc.Verify(sampleKey.Public().(ed25519.PublicKey)) != nil {
		t.Fatalf("socket vote's receipt %+v does not verify", rc)
	}
}

// An edge whose Receipts is false sends TRQ4, which a full node of the
// release before reads: the full node answers it TRA2, without receipts,
// and the votes' answers are otherwise the same.
func TestBatchWithoutReceiptsIsAnsweredWithout(t *testing.T) {
	conn := testnats.Start(t)
	full := signingNode{&fullNode{name: "eu-1"}}
	startServer(t, conn(), full, "k")
	seal, open := testseal.Sealer("k")
	reqs := []Request{{Kind: KindVote, Poll: "p", Votes: []api.Vote{{Option: "a", Voter: "v1", Idem: "k1"}}}}
	for _, c := range []struct {
		magic, reply string
		receipts     bool
	}{{batchMagicV4, answerMagicV2, false}, {batchMagic, answerMagic, true}} {
		m, err := conn().Request(subject, seal(appendBatch(nil, c.magic, 0, reqs)), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		body, err := open(m.Data)
		if err != nil || !strings.HasPrefix(string(body), c.reply) {
			t.Fatalf("%s answered %.4q (%v), want %s", c.magic, body, err, c.reply)
		}
		as, err := DecodeAnswers(body, reqs)
		if err != nil || as[0].Vote == nil || (as[0].Vote.Results[0].Receipt != nil) != c.receipts {
			t.Fatalf("%s: %s (%v), want receipts %t", c.magic, show(as), err, c.receipts)
		}
	}

	// Through an edge that may not send TRQ5 (nil Receipts): no receipt.
	edge, _ := startEdge(t, conn(), "k", nil)
	a := edge.Relay(context.Background(), Request{Kind: KindVote, Poll: "p", Votes: []api.Vote{{Option: "a", Voter: "v2", Idem: "k2"}}})
	if a.Vote == nil || a.Vote.Results[0].Status != api.StatusAccepted || a.Vote.Results[0].Receipt != nil {
		t.Fatalf("through a TRQ4 edge: %s", a.text())
	}
}

// At the codec: the same answers in TRA2 lose their receipts and nothing
// else; a proof, which TRA2 cannot carry, and one too large for TRA3,
// are written as a refusal, not as bytes the edge would refuse whole.
func TestAnswersOfTheReleaseBefore(t *testing.T) {
	reqs, as := sampleAnswered()[:5], sampleAnswers()[:5]
	got, err := DecodeAnswers(appendAnswers(nil, answerMagicV2, as), reqs)
	if err != nil {
		t.Fatal(err)
	}
	as = sampleAnswers()[:5]
	for i := range as[0].Vote.Results {
		as[0].Vote.Results[i].Receipt = nil
	}
	if !reflect.DeepEqual(got, as) {
		t.Fatalf("TRA2:\n got %s\nwant %s", show(got), show(as))
	}
	big := Answer{Proof: &ProofAnswer{Status: 200, Body: []byte(`"` + strings.Repeat("x", receipt.MaxProofJSON) + `"`)}}
	for name, b := range map[string][]byte{
		"proof in TRA2": appendAnswers(nil, answerMagicV2, []Answer{sampleProof()}),
		"proof too big": AppendAnswers(nil, []Answer{big}),
		"not JSON":      AppendAnswers(nil, []Answer{{Proof: &ProofAnswer{Status: 200, Body: []byte("{")}}}),
	} {
		got, err := DecodeAnswers(b, []Request{proofReq("p", sampleLeaf)})
		if err != nil || got[0].Err == nil || got[0].Err.Status != http.StatusBadGateway {
			t.Errorf("%s: %s (%v), want 502", name, show(got), err)
		}
	}
	// A receipt that would not verify as the edge rebuilds it is left out.
	odd := sampleAnswers()[0]
	odd.Vote.Results[0].Receipt.VoteID = "eu-1/9"
	odd.Vote.Results[2].Receipt.Leaf = strings.ToUpper(sampleLeaf)
	got, err = DecodeAnswers(AppendAnswers(nil, []Answer{odd}), sampleAnswered()[:1])
	if err != nil || got[0].Vote.Results[0].Receipt != nil || got[0].Vote.Results[2].Receipt != nil {
		t.Fatalf("odd receipts: %s (%v)", show(got), err)
	}
}

// A voter's proof through an edge: the full node's status and body as
// they are; a leaf or poll that cannot be is refused at the edge; while
// a full node of the release before is in the cluster, 503 with
// Retry-After, and nothing is relayed.
func TestProofThroughTheEdge(t *testing.T) {
	conn := testnats.Start(t)
	full := &fullNode{name: "eu-1"}
	startServer(t, conn(), full, "k")
	var receipts atomic.Bool
	receipts.Store(true)
	edge, _ := startEdge(t, conn(), "k", func(c *EdgeConfig) { c.Receipts = receipts.Load })
	get := func(poll, leaf string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/v1/polls/"+poll+"/proofs/"+leaf, nil)
		req.SetPathValue("poll", poll)
		req.SetPathValue("leaf", leaf)
		edge.HandleProof(rec, req)
		return rec
	}
	for _, c := range []struct {
		poll, leaf string
		status     int
		body       string
	}{
		{"p", sampleLeaf, 200, `{"poll":"p","leaf":"` + sampleLeaf + `","node":"eu-1"}` + "\n"},
		{"p", "00" + sampleLeaf[2:], 404, `{"error":{"code":"not_found","message":"no record with that leaf"}}` + "\n"},
		{"p", strings.ToUpper(sampleLeaf), 400, `"invalid_request"`},
		{"p", sampleLeaf[1:], 400, `"invalid_request"`},
		{"p", "zz" + sampleLeaf[2:], 400, `"invalid_request"`},
		{"no%20such", sampleLeaf, 404, `"poll_not_found"`},
	} {
		rec := get(c.poll, c.leaf)
		if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.body) || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s/%s: %d %s, want %d %s", c.poll, c.leaf, rec.Code, rec.Body, c.status, c.body)
		}
		if cache := rec.Header().Get("Cache-Control"); (c.status == http.StatusOK) != (cache != "") {
			t.Errorf("%s/%s: %d with Cache-Control %q", c.poll, c.leaf, rec.Code, cache)
		}
	}
	if n := full.proofs.Load(); n != 2 {
		t.Fatalf("%d proofs relayed, want 2", n)
	}
	receipts.Store(false)
	rec := get("p", sampleLeaf)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "30" || !strings.Contains(rec.Body.String(), "every full node") {
		t.Fatalf("with a full node of the release before: %d %s %v", rec.Code, rec.Body, rec.Header())
	}
	// One that found the gate open and is batched as it closes is answered
	// 503 too, and the votes beside it still go (TRQ4).
	a := edge.Relay(context.Background(), proofReq("p", sampleLeaf))
	if a.Err == nil || a.Err.Status != http.StatusServiceUnavailable {
		t.Fatalf("a proof batched as TRQ4: %s", a.text())
	}
	if v := edge.Relay(context.Background(), voteReq(3)); v.status() != http.StatusOK {
		t.Fatalf("a vote: %s", v.text())
	}
	if n := full.proofs.Load(); n != 2 {
		t.Fatalf("%d proofs relayed, want still 2", n)
	}
}

// A proof whose full node's answer cannot cross (too large) is 502, and
// the votes of the same batch keep their answers.
func TestProofTooLargeSparesItsBatch(t *testing.T) {
	conn := testnats.Start(t)
	startServer(t, conn(), bigProofs{&fullNode{name: "eu-1"}}, "k")
	seal, open := testseal.Sealer("k")
	reqs := []Request{voteReq(1), proofReq("p", sampleLeaf), voteReq(2)}
	reqs[0].Votes, reqs[0].Body = []api.Vote{{Option: "a", Voter: "v1", Idem: "k1"}}, nil
	reqs[2].Votes, reqs[2].Body = []api.Vote{{Option: "a", Voter: "v2", Idem: "k2"}}, nil
	m, err := conn().Request(subject, seal(AppendBatch(nil, reqs)), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	body, err := open(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	as, err := DecodeAnswers(body, reqs)
	if err != nil || as[0].Vote == nil || as[2].Vote == nil || as[1].Err == nil || as[1].Err.Status != http.StatusBadGateway {
		t.Fatalf("%s (%v)", show(as), err)
	}
}

type bigProofs struct{ *fullNode }

func (bigProofs) Proof(context.Context, string, string) (int, []byte) {
	return http.StatusOK, []byte(`"` + strings.Repeat("x", receipt.MaxProofJSON) + `"`)
}
