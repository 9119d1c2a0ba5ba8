package buddy

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"reflect"
	"strings"
	"testing"

	"tally/ledger"
)

func sampleRecords() []ledger.Record {
	recs := []ledger.Record{vote(1), vote(2)}
	for i := range recs {
		recs[i].Replica, recs[i].Seq = "eu-1", uint64(i+1)
	}
	return recs
}

// sampleRequest is eu-1's request of sampleRecords, signed with key.
func sampleRequest(key ed25519.PrivateKey) request {
	recs := sampleRecords()
	return request{From: "eu-1", Recs: recs, Heads: signHeads(key, recs)}
}

func TestRequestRoundTrips(t *testing.T) {
	want := sampleRequest(newKey(t))
	req, err := decodeRequest(appendRequest(nil, want))
	if err != nil || req.From != "eu-1" || len(req.Recs) != 2 || req.Recs[1].Hash() != sampleRecords()[1].Hash() ||
		!reflect.DeepEqual(req.Heads, want.Heads) || req.Heads[0].Seq != 2 || !req.Heads[0].Verify() {
		t.Fatalf("%+v %v", req, err)
	}
	for _, rep := range []reply{{Status: statusOK}, {Status: statusBehind, Heads: []head{{"p", 7}, {"q", 0}}}, {Status: statusRefuse, Reason: "conflict"}} {
		got, err := decodeReply(appendReply(nil, rep))
		if err != nil || !reflect.DeepEqual(got, rep) {
			t.Fatalf("%+v: %+v %v", rep, got, err)
		}
	}
}

// Malformed, oversized and hostile messages are refused, never stored.
func TestHostileRequestsAreRefused(t *testing.T) {
	key := newKey(t)
	good := appendRequest(nil, sampleRequest(key))
	other := sampleRequest(key)
	other.Recs[1].Replica = "us-1" // a record of another replica in eu-1's copy
	huge := append([]byte(requestMagic), 4, 'e', 'u', '-', '1')
	huge = append(huge, 0xff, 0xff, 0x03) // 65535 records claimed
	with := func(change func(*request)) []byte {
		req := sampleRequest(key)
		change(&req)
		return appendRequest(nil, req)
	}
	recs := sampleRecords()
	beforeHeads := with(func(r *request) { r.Heads = nil })
	beforeHeads = beforeHeads[:len(beforeHeads)-1] // the records, without the heads' count
	usHead := ledger.SignHead(key, "p", "us-1", 2, recs[1].Hash())
	for name, b := range map[string][]byte{
		"empty":                  nil,
		"no magic":               []byte("hello"),
		"the release before":     append([]byte("TCC1"), good[len(requestMagic):]...),
		"truncated":              good[:len(good)-3],
		"trailing bytes":         append(append([]byte{}, good...), 0),
		"another replica's":      appendRequest(nil, other),
		"too many records":       huge,
		"a bad replica id":       appendRequest(nil, request{From: strings.Repeat("x", 200)}),
		"a record that is noise": append(append([]byte(requestMagic), 4, 'e', 'u', '-', '1', 1), 3, 1, 2, 3),
		"no signed head":         with(func(r *request) { r.Heads = nil }),
		"two heads of a chain":   with(func(r *request) { r.Heads = append(r.Heads, r.Heads[0]) }),
		"a head of an earlier record": with(func(r *request) {
			r.Heads = []ledger.SignedHead{ledger.SignHead(key, "p", "eu-1", 1, recs[0].Hash())}
		}),
		"a head of another hash": with(func(r *request) {
			r.Heads = []ledger.SignedHead{ledger.SignHead(key, "p", "eu-1", 2, recs[0].Hash())}
		}),
		"a head of another poll": with(func(r *request) {
			r.Heads = []ledger.SignedHead{ledger.SignHead(key, "q", "eu-1", 2, recs[1].Hash())}
		}),
		"another replica's head": with(func(r *request) { r.Heads = []ledger.SignedHead{usHead} }),
		"a head that is noise":   append(bytes.Clone(beforeHeads), 1, 3, 1, 2, 3),
		"heads claimed":          append(bytes.Clone(beforeHeads), 0xff, 0xff, 0x03),
	} {
		if _, err := decodeRequest(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"empty":          nil,
		"unknown status": []byte(replyMagic + "\x09"),
		"trailing":       []byte(replyMagic + "\x00\x00"),
		"heads claimed":  []byte(replyMagic + "\x01\xff\xff\xff\x0f"),
	} {
		if _, err := decodeReply(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("reply %s: %v, want ErrMalformed", name, err)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add(appendRequest(nil, sampleRequest(newKey(f))))
	f.Add([]byte(requestMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := decodeRequest(b)
		if err != nil {
			return
		}
		if len(req.Recs) > MaxRecords || len(req.Heads) > len(req.Recs) {
			t.Fatalf("%d records, %d heads", len(req.Recs), len(req.Heads))
		}
		for _, h := range req.Heads {
			if h.Replica != req.From {
				t.Fatalf("a head of %s in %s's request", h.Replica, req.From)
			}
		}
		again := appendRequest(nil, req)
		if req2, err := decodeRequest(again); err != nil || !reflect.DeepEqual(req2.Heads, req.Heads) || len(req2.Recs) != len(req.Recs) {
			t.Fatalf("re-encoding: %+v %v", req2, err)
		}
		if !bytes.Equal(appendRequest(nil, req), again) {
			t.Fatal("encoding is not stable")
		}
	})
}

func FuzzDecodeReply(f *testing.F) {
	f.Add(appendReply(nil, reply{Status: statusBehind, Heads: []head{{"p", 7}}}))
	f.Add(appendReply(nil, reply{Status: statusRefuse, Reason: "x"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := decodeReply(b)
		if err != nil {
			return
		}
		if again, err := decodeReply(appendReply(nil, rep)); err != nil || !reflect.DeepEqual(again, rep) {
			t.Fatalf("re-encoding: %+v %v", again, err)
		}
	})
}
