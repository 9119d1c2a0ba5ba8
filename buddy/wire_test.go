package buddy

import (
	"bytes"
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

func TestRequestRoundTrips(t *testing.T) {
	from, recs, err := decodeRequest(appendRequest(nil, "eu-1", sampleRecords()))
	if err != nil || from != "eu-1" || len(recs) != 2 || recs[1].Hash() != sampleRecords()[1].Hash() {
		t.Fatalf("%q %d %v", from, len(recs), err)
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
	good := appendRequest(nil, "eu-1", sampleRecords())
	other := sampleRecords()
	other[1].Replica = "us-1" // a record of another replica in eu-1's copy
	huge := append([]byte(requestMagic), 4, 'e', 'u', '-', '1')
	huge = append(huge, 0xff, 0xff, 0x03) // 65535 records claimed
	for name, b := range map[string][]byte{
		"empty":                  nil,
		"no magic":               []byte("hello"),
		"truncated":              good[:len(good)-3],
		"trailing bytes":         append(append([]byte{}, good...), 0),
		"another replica's":      appendRequest(nil, "eu-1", other),
		"too many records":       huge,
		"a bad replica id":       appendRequest(nil, strings.Repeat("x", 200), nil),
		"a record that is noise": append(append([]byte(requestMagic), 4, 'e', 'u', '-', '1', 1), 3, 1, 2, 3),
	} {
		if _, _, err := decodeRequest(b); !errors.Is(err, ErrMalformed) {
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
	f.Add(appendRequest(nil, "eu-1", sampleRecords()))
	f.Add([]byte(requestMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		from, recs, err := decodeRequest(b)
		if err != nil {
			return
		}
		if len(recs) > MaxRecords {
			t.Fatalf("%d records", len(recs))
		}
		again := appendRequest(nil, from, recs)
		if _, recs2, err := decodeRequest(again); err != nil || len(recs2) != len(recs) {
			t.Fatalf("re-encoding: %d %v", len(recs2), err)
		}
		if !bytes.Equal(appendRequest(nil, from, recs), again) {
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
