package relay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"tally/api"
)

func sampleBatch() []Request {
	return []Request{
		{Kind: KindVote, Poll: "p", Body: []byte(`{"option":"a","voter":"v","idem":"k"}`),
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
	as := []Answer{{Status: 200, Body: []byte(`{"results":[]}`)}, {Status: 429, RetryAfter: 2 * time.Second, Body: []byte(`{"error":{}}`)}}
	got, err := DecodeAnswers(AppendAnswers(nil, as), 2)
	if err != nil || !reflect.DeepEqual(got, as) {
		t.Fatalf("answers: %+v %v", got, err)
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
		"long body":      AppendBatch(nil, []Request{{Kind: KindVote, Poll: "p", Body: make([]byte, MaxBody+1)}}),
		"long agent":     AppendBatch(nil, []Request{{Kind: KindVote, Poll: "p", Sender: api.Sender{UserAgent: strings.Repeat("x", MaxUserAgent+1)}}}),
		"long token":     AppendBatch(nil, []Request{{Kind: KindVote, Poll: "p", Sender: api.Sender{Token: strings.Repeat("x", maxToken+1)}}}),
	} {
		if _, err := DecodeBatch(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	answers := AppendAnswers(nil, []Answer{{Status: 200, Body: []byte("{}")}})
	for name, c := range map[string]struct {
		b    []byte
		want int
	}{
		"wrong count":   {answers, 2},
		"bad status":    {AppendAnswers(nil, []Answer{{Status: 999}}), 1},
		"zero status":   {AppendAnswers(nil, []Answer{{}}), 1},
		"truncated":     {answers[:len(answers)-1], 1},
		"trailing":      {append(bytes.Clone(answers), 1), 1},
		"not an answer": {good, 2},
	} {
		if _, err := DecodeAnswers(c.b, c.want); !errors.Is(err, ErrMalformed) {
			t.Errorf("answers, %s: %v, want ErrMalformed", name, err)
		}
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
	f.Fuzz(func(t *testing.T, b []byte) {
		by, reqs, err := DecodeBatchBy(b)
		if err != nil {
			return
		}
		if len(reqs) > MaxBatch || by < 0 {
			t.Fatalf("%d requests, start-by %d", len(reqs), by)
		}
		by2, again, err := DecodeBatchBy(AppendBatchBy(nil, by, reqs))
		if err != nil || len(again) != len(reqs) || by2 != by {
			t.Fatalf("re-encoding: %d %d %v", len(again), by2, err)
		}
	})
}

func FuzzDecodeAnswers(f *testing.F) {
	f.Add(AppendAnswers(nil, []Answer{{Status: 200, Body: []byte("{}")}}), 1)
	f.Add([]byte(answerMagic), 0)
	f.Fuzz(func(t *testing.T, b []byte, want int) {
		as, err := DecodeAnswers(b, want)
		if err == nil && len(as) != want {
			t.Fatalf("%d answers, want %d", len(as), want)
		}
	})
}
