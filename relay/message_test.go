package relay

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/internal/wire"
	"tally/receipt"
)

func sampleBatch() []Request {
	return []Request{
		{Kind: KindVote, Poll: "p", Votes: []api.Vote{{Option: "a", Voter: "v", Idem: "k"}, {Option: "b", Voter: "v", Idem: "k2", Name: "Ana", After: "1796000000000.3"}},
			Sender: api.Sender{IP: "203.0.113.7", UserAgent: "phone", Token: "t1.x", SocketAge: 3 * time.Second, ShownMs: 1_796_000_000_000, RTTMs: 42, ReceivedMs: 1_796_000_001_000}},
		{Kind: KindSession, Body: nil, Sender: api.HTTPSender("2001:db8::1", "", "", 0)},
	}
}

func TestBatchRoundTrip(t *testing.T) {
	in := sampleBatch()
	out, err := DecodeBatch(AppendBatch(nil, in))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
	}
	got, err := DecodeAnswers(AppendAnswers(nil, sampleAnswers()), sampleAnswered())
	if err != nil || !reflect.DeepEqual(got, sampleAnswers()) {
		t.Fatalf("answers:\n got %s\nwant %s (%v)", show(got), show(sampleAnswers()), err)
	}
}

// Damaged, oversized and hostile messages are refused whole.
func TestDecodeBatchRefusesHostileInput(t *testing.T) {
	good := AppendBatch(nil, sampleBatch())
	count := func(n uint64) []byte { return binary.AppendUvarint([]byte(batchMagic), n) }
	for name, b := range map[string][]byte{
		"empty":          nil,
		"magic only":     []byte(batchMagic),
		"wrong magic":    append([]byte("XXXX"), good[4:]...),
		"truncated":      good[:len(good)-3],
		"trailing bytes": append(bytes.Clone(good), 0),
		"too many":       count(MaxBatch + 1),
		"count lies":     count(3),
		"huge count":     count(1 << 62),
		"oversized":      append(count(1), make([]byte, MaxBatchBytes+1)...),
		"bad kind":       AppendBatch(nil, []Request{{Kind: 9, Poll: "p"}}),
		"bad poll id":    AppendBatch(nil, []Request{{Kind: KindVote, Poll: "no spaces"}}),
		"empty poll id":  AppendBatch(nil, []Request{{Kind: KindVote}}),
		"session poll":   AppendBatch(nil, []Request{{Kind: KindSession, Poll: "p"}}),
		"join poll":      AppendBatch(nil, []Request{{Kind: KindJoin, Poll: "p"}}),
		"join body":      AppendBatch(nil, []Request{{Kind: KindJoin, Body: []byte("{}")}}),
		"long body":      AppendBatch(nil, []Request{{Kind: KindSession, Body: make([]byte, MaxBody+1)}}),
		"no votes":       AppendBatch(nil, []Request{{Kind: KindVote, Poll: "p"}}),
		"too many votes": AppendBatch(nil, []Request{{Kind: KindVote, Poll: "p", Votes: make([]api.Vote, api.MaxBatch+1)}}),
		"long option":    AppendBatch(nil, []Request{{Kind: KindVote, Poll: "p", Votes: []api.Vote{{Option: strings.Repeat("o", api.MaxOptionLen+1)}}}}),
		"long voter":     AppendBatch(nil, []Request{{Kind: KindVote, Poll: "p", Votes: []api.Vote{{Voter: strings.Repeat("v", api.MaxVoterLen+1)}}}}),
		"long idem":      AppendBatch(nil, []Request{{Kind: KindVote, Poll: "p", Votes: []api.Vote{{Idem: strings.Repeat("k", api.MaxIdemLen+1)}}}}),
		"long name":      AppendBatch(nil, []Request{{Kind: KindVote, Poll: "p", Votes: []api.Vote{{Name: strings.Repeat("n", api.MaxNameLen+1)}}}}),
		"long after":     AppendBatch(nil, []Request{{Kind: KindVote, Poll: "p", Votes: []api.Vote{{After: strings.Repeat("1", api.MaxStampLen+1)}}}}),
		"old long body":  appendBatchV3(nil, []Request{{Kind: KindVote, Poll: "p", Body: make([]byte, MaxBody+1)}}),
		"long agent":     AppendBatch(nil, []Request{{Kind: KindVote, Poll: "p", Sender: api.Sender{UserAgent: strings.Repeat("x", MaxUserAgent+1)}}}),
		"long token":     AppendBatch(nil, []Request{{Kind: KindVote, Poll: "p", Sender: api.Sender{Token: strings.Repeat("x", maxToken+1)}}}),
		"proof in TRQ4":  appendBatch(nil, batchMagicV4, 0, []Request{proofReq("p", sampleLeaf)}),
		"proof in TRQ3":  appendBatchV3(nil, []Request{proofReq("p", sampleLeaf)}),
		"proof poll":     AppendBatch(nil, []Request{proofReq("no spaces", sampleLeaf)}),
		"proof no poll":  AppendBatch(nil, []Request{proofReq("", sampleLeaf)}),
		"proof no leaf":  AppendBatch(nil, []Request{proofReq("p", "")}),
		"proof short":    AppendBatch(nil, []Request{proofReq("p", sampleLeaf[2:])}),
		"proof long":     AppendBatch(nil, []Request{proofReq("p", sampleLeaf+"00")}),
		"proof upper":    AppendBatch(nil, []Request{proofReq("p", strings.ToUpper(sampleLeaf))}),
		"proof not hex":  AppendBatch(nil, []Request{proofReq("p", "g"+sampleLeaf[1:])}),
		"kind 5":         AppendBatch(nil, []Request{{Kind: 5, Poll: "p", Body: []byte(sampleLeaf)}}),
	} {
		if _, err := DecodeBatch(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	answers := AppendAnswers(nil, sampleAnswers()[:1])
	one := func(a Answer) []byte { return AppendAnswers(nil, []Answer{a}) }
	results := func(n int) []byte {
		b := binary.AppendUvarint(append([]byte(answerMagic), 1, tagVote, 0), uint64(n))
		for range n {
			b = append(b, 0, 0, 0, 0, 0, 0, 0)
		}
		return b
	}
	// withReceipt is a vote answer of one result whose receipt's presence
	// byte is presence, with the leaf and signature after it.
	withReceipt := func(res api.VoteResult, presence byte) []byte {
		b := append([]byte(answerMagic), 1, tagVote, 0, 1)
		for _, s := range [...]string{res.Idem, res.Status, res.VoteID, res.Error, res.Stamp} {
			b = wire.AppendString(b, s)
		}
		return append(append(b, 0, presence), make([]byte, 32+64)...)
	}
	signed := sampleAnswers()[0].Vote.Results[0]
	vote := []Request{{Kind: KindVote, Poll: "p"}}
	for name, c := range map[string]struct {
		b    []byte
		reqs []Request
	}{
		"wrong count":       {answers, sampleAnswered()[:2]},
		"bad status":        {one(ErrorAnswer(&api.Error{Status: 999, Code: "x"})), vote},
		"success status":    {one(ErrorAnswer(&api.Error{Status: 200, Code: "x"})), vote},
		"no code":           {one(ErrorAnswer(&api.Error{Status: 400})), vote},
		"day-long retry":    {one(ErrorAnswer(&api.Error{Status: 429, Code: "x", RetryAfter: 24 * time.Hour})), vote},
		"bad tag":           {append([]byte(answerMagic), 1, 9), vote},
		"long message":      {one(ErrorAnswer(&api.Error{Status: 400, Code: "x", Message: strings.Repeat("m", maxAnswerString+1)})), vote},
		"bits":              {one(Answer{Session: &api.SessionResponse{Bits: 65}}), vote},
		"too many votes":    {results(api.MaxBatch + 1), vote},
		"truncated":         {answers[:len(answers)-1], vote},
		"trailing":          {append(bytes.Clone(answers), 1), vote},
		"not an answer":     {good, sampleAnswered()[:2]},
		"old version":       {appendAnswersV1(nil, sampleAnswers()[:1]), vote},
		"receipt presence":  {withReceipt(signed, 2), vote},
		"receipt truncated": {withReceipt(signed, 1)[:len(withReceipt(signed, 1))-1], vote},
		"receipt no id":     {withReceipt(api.VoteResult{Idem: "k", Status: "accepted", Stamp: "1.0"}, 1), vote},
		"receipt no stamp":  {withReceipt(api.VoteResult{Idem: "k", Status: "accepted", VoteID: "r/1"}, 1), vote},
		"receipt, session":  {withReceipt(signed, 1), []Request{{Kind: KindSession}}},
		"receipt, proof":    {withReceipt(signed, 1), []Request{proofReq("p", sampleLeaf)}},
		"proof in TRA2":     {append(append([]byte(answerMagicV2), 1), AppendAnswers(nil, []Answer{sampleProof()})[5:]...), vote},
		"proof status 199":  {rawProof(199, []byte(`{}`)), vote},
		"proof status 600":  {rawProof(600, []byte(`{}`)), vote},
		"proof huge status": {rawProof(1<<62, []byte(`{}`)), vote},
		"proof not JSON":    {rawProof(200, []byte(`{"leaf":`)), vote},
		"proof empty":       {rawProof(200, nil), vote},
		"proof too long":    {rawProof(200, []byte(`"`+strings.Repeat("x", receipt.MaxProofJSON-1)+`"`)), vote},
	} {
		if _, err := DecodeAnswers(c.b, c.reqs); !errors.Is(err, ErrMalformed) {
			t.Errorf("answers, %s: %v, want ErrMalformed", name, err)
		}
	}
}

// rawProof is a TRA3 answer of one proof, as given: no check on the way.
func rawProof(status uint64, body []byte) []byte {
	b := append([]byte(answerMagic), 1, tagProof)
	return wire.AppendBytes(binary.AppendUvarint(b, status), body)
}

// appendBatchV3 is the relay message of an edge of the release before
// (TRQ3): a vote request carries its body, not its votes.
func appendBatchV3(b []byte, reqs []Request) []byte {
	b = append(b, batchMagicV3...)
	b = binary.AppendVarint(b, 0)
	b = binary.AppendUvarint(b, uint64(len(reqs)))
	for _, r := range reqs {
		b = append(b, r.Kind)
		b = wire.AppendString(b, r.Poll)
		b = wire.AppendBytes(b, r.Body)
		s := r.Sender
		b = wire.AppendString(b, s.IP)
		b = wire.AppendString(b, s.UserAgent)
		b = wire.AppendString(b, s.Token)
		for _, v := range []int64{int64(s.SocketAge), s.ShownMs, s.RTTMs, s.ReceivedMs} {
			b = binary.AppendVarint(b, v)
		}
	}
	return b
}

// An edge of the release before relays vote bodies (TRQ3): a full node
// upgraded first reads them as bodies, for its pipeline to decode.
func TestBatchOfTheReleaseBeforeCarriesBodies(t *testing.T) {
	in := []Request{{Kind: KindVote, Poll: "p", Body: []byte(`{"option":"a","voter":"v","idem":"k"}`), Sender: api.Sender{IP: "203.0.113.7"}}}
	reply, _, out, err := decodeBatch(appendBatchV3(nil, in))
	if err != nil || reply != answerMagicV2 || !reflect.DeepEqual(in, out) {
		t.Fatalf("TRQ3: answered %q, %+v, %v", reply, out, err)
	}
}

// Whatever bytes arrive, the decoder returns a bounded batch or an
// error, never a panic, and what it accepts encodes back to the same.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(AppendBatch(nil, sampleBatch()))
	f.Add([]byte(batchMagic))
	f.Add(append([]byte(batchMagic), 0xff, 0xff, 0xff))
	f.Add(AppendBatchBy(nil, 1796000000000, sampleBatch()))
	f.Add([]byte(batchMagicV1 + "\x00"))
	f.Add(appendBatchV3(nil, []Request{{Kind: KindVote, Poll: "p", Body: []byte(`{}`)}}))
	f.Add(appendBatch(nil, batchMagicV4, 1796000000000, sampleBatch()))
	f.Add(AppendBatch(nil, append(sampleBatch(), proofReq("p", sampleLeaf))))
	f.Fuzz(func(t *testing.T, b []byte) {
		by, reqs, err := DecodeBatchBy(b)
		if err != nil {
			return
		}
		if len(reqs) > MaxBatch || by < 0 {
			t.Fatalf("%d requests, start-by %d", len(reqs), by)
		}
		for i, q := range reqs {
			if q.Kind == KindVote && q.Votes == nil { // an older edge's body: today's edge sends it decoded
				reqs[i].Votes, reqs[i].Body = []api.Vote{{}}, nil
			}
		}
		by2, again, err := DecodeBatchBy(AppendBatchBy(nil, by, reqs))
		if err != nil || len(again) != len(reqs) || by2 != by {
			t.Fatalf("re-encoding: %d %d %v", len(again), by2, err)
		}
	})
}

// Whatever bytes arrive as the answer to requests of the given kinds,
// the decoder returns an answer to each or an error, never a panic; what
// it accepts encodes back, in its version, to the same answers, and a
// TRA2 answer holds no receipt.
func FuzzDecodeAnswers(f *testing.F) {
	kinds := func(reqs []Request) []byte {
		var b []byte
		for _, q := range reqs {
			b = append(b, q.Kind)
		}
		return b
	}
	f.Add(AppendAnswers(nil, sampleAnswers()), kinds(sampleAnswered()))
	f.Add(appendAnswers(nil, answerMagicV2, sampleAnswers()), kinds(sampleAnswered()))
	f.Add([]byte(answerMagic), []byte{})
	f.Fuzz(func(t *testing.T, b []byte, kinds []byte) {
		if len(kinds) > MaxBatch {
			return
		}
		reqs := make([]Request, len(kinds))
		for i, k := range kinds {
			reqs[i] = Request{Kind: k%4 + 1}
			if reqs[i].Kind == KindVote || reqs[i].Kind == KindProof {
				reqs[i].Poll = "p"
			}
		}
		as, err := DecodeAnswers(b, reqs)
		if err != nil {
			return
		}
		if len(as) != len(reqs) {
			t.Fatalf("%d answers to %d requests", len(as), len(reqs))
		}
		magic := string(b[:len(answerMagic)])
		again, err := DecodeAnswers(appendAnswers(nil, magic, as), reqs)
		if err != nil || !reflect.DeepEqual(again, as) {
			t.Fatalf("re-encoding: %s, was %s (%v)", show(again), show(as), err)
		}
		for i, a := range as {
			if status, body := a.JSON(); status < 200 || status > 599 || !json.Valid(body) {
				t.Fatalf("written as %d %q", status, body)
			}
			for _, res := range voteResults(a) {
				if rc := res.Receipt; rc != nil && (magic != answerMagic || reqs[i].Kind != KindVote || rc.Poll != reqs[i].Poll || rc.VoteID != res.VoteID || rc.Stamp != res.Stamp) {
					t.Fatalf("answer %d (%s, to kind %d): receipt %+v", i, magic, reqs[i].Kind, rc)
				}
			}
		}
	})
}

func voteResults(a Answer) []api.VoteResult {
	if a.Vote == nil {
		return nil
	}
	return a.Vote.Results
}

// sampleAnswers holds one answer of every kind, every field set: the
// answers to sampleAnswered.
func sampleAnswers() []Answer {
	ms := int64(2400)
	retry := api.Errorf(http.StatusTooManyRequests, api.CodeRateLimited, "slow down")
	retry.RetryAfter = 2 * time.Second
	return []Answer{
		{Vote: &api.VoteResponse{ServerTime: 1796000000000, Results: []api.VoteResult{
			{Idem: "k1", Status: api.StatusAccepted, VoteID: "eu-1/7", Stamp: "1796000000000.3", ElapsedMs: &ms,
				Receipt: sampleReceipt("p", "eu-1/7", "1796000000000.3")},
			{Idem: "k2", Status: api.StatusRejected, Error: "invalid_option"},
			{Idem: "k3", Status: api.StatusLate, VoteID: "eu-1/8", Stamp: "1796000000001.0", Receipt: sampleReceipt("p", "eu-1/8", "1796000000001.0")},
		}}},
		ErrorAnswer(retry),
		{Session: &api.SessionResponse{Status: "issued", Token: "t", Voter: "v", Bits: 16, ExpiresAt: 5, ServerTime: 4, Challenge: "c"}},
		{Join: &JoinAnswer{Voter: "v", Counted: true}},
		{Join: &JoinAnswer{}},
		sampleProof(),
		{Proof: &ProofAnswer{Status: http.StatusNotFound, Body: []byte(`{"error":{"code":"not_found","message":"no such leaf"}}` + "\n")}},
	}
}

// sampleAnswered are the requests sampleAnswers answer.
func sampleAnswered() []Request {
	return []Request{{Kind: KindVote, Poll: "p"}, {Kind: KindVote, Poll: "p"}, {Kind: KindSession}, {Kind: KindJoin}, {Kind: KindJoin},
		proofReq("p", sampleLeaf), proofReq("p", sampleLeaf)}
}

func sampleProof() Answer {
	return Answer{Proof: &ProofAnswer{Status: http.StatusOK, Body: []byte(`{"leaf":"` + sampleLeaf + `","index":3,"path":[]}` + "\n")}}
}

const sampleLeaf = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func proofReq(poll, leaf string) Request {
	return Request{Kind: KindProof, Poll: poll, Body: []byte(leaf)}
}

// sampleReceipt is a receipt signed with a fixed key (sampleKey).
func sampleReceipt(poll, voteID, stamp string) *receipt.Receipt {
	rc := &receipt.Receipt{Poll: poll, VoteID: voteID, Stamp: stamp, Leaf: sampleLeaf}
	rc.Sign(sampleKey)
	return rc
}

var sampleKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))

func show(as []Answer) string {
	var b strings.Builder
	for _, a := range as {
		_, body := a.JSON()
		b.Write(body)
	}
	return b.String()
}

// A request of exactly api.MaxBatch votes, each field at its bound, goes
// through; one vote more, or one byte more in any field, does not.
func TestBatchVotesAtTheirBounds(t *testing.T) {
	full := api.Vote{Option: strings.Repeat("o", api.MaxOptionLen), Voter: strings.Repeat("v", api.MaxVoterLen),
		Idem: strings.Repeat("k", api.MaxIdemLen), Name: strings.Repeat("n", api.MaxNameLen), After: strings.Repeat("1", api.MaxStampLen)}
	votes := make([]api.Vote, api.MaxBatch)
	for i := range votes {
		votes[i] = full
	}
	in := []Request{{Kind: KindVote, Poll: "p", Votes: votes}}
	out, err := DecodeBatch(AppendBatch(nil, in))
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("at the bounds: %v", err)
	}
	if _, err := DecodeBatch(AppendBatch(nil, []Request{{Kind: KindVote, Poll: "p", Votes: append(votes, full)}})); !errors.Is(err, ErrMalformed) {
		t.Fatalf("one vote over: %v", err)
	}
}
