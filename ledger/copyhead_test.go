package ledger

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// chainOf is n records of replica's chain of poll p, linked from seq 1.
func chainOf(replica string, n int) []Record {
	ch := chainer{}
	var out []Record
	for i := range n {
		r := vote("p", fmt.Sprintf("v%d", i), "o", fmt.Sprintf("k%d", i), int64(10+i))
		r.Replica = replica
		out = append(out, ch.add(r))
	}
	return out
}

func newKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// headOf is key's signed head of recs' last record.
func headOf(key ed25519.PrivateKey, recs []Record) SignedHead {
	last := recs[len(recs)-1]
	return SignHead(key, last.Poll, last.Replica, last.Seq, last.Hash())
}

func TestSignedHeadBinaryRoundTrips(t *testing.T) {
	key := newKey(t)
	h := headOf(key, chainOf("eu-1", 3))
	got, err := DecodeSignedHead(h.AppendBinary(nil))
	if err != nil || !reflect.DeepEqual(got, h) || !got.Verify() {
		t.Fatalf("%+v %v", got, err)
	}
	// The binary form and the export line carry the same signature.
	var line bytes.Buffer
	if err := WriteSignedHead(&line, &h); err != nil || !bytes.Contains(line.Bytes(), []byte(`"seq":3`)) {
		t.Fatalf("%s %v", line.Bytes(), err)
	}
}

// Malformed and hostile signed heads are refused with ErrMalformed.
func TestHostileSignedHeadsAreRefused(t *testing.T) {
	h := headOf(newKey(t), chainOf("eu-1", 3))
	good := h.AppendBinary(nil)
	zeroSeq := h
	zeroSeq.Seq = 0
	badID := h
	badID.Replica = "eu 1"
	shortKey := h
	shortKey.Pub = shortKey.Pub[:31]
	for name, b := range map[string][]byte{
		"empty":            nil,
		"another version":  append([]byte{2}, good[1:]...),
		"truncated":        good[:len(good)-1],
		"trailing":         append(bytes.Clone(good), 0),
		"seq 0":            zeroSeq.AppendBinary(nil),
		"a bad replica id": badID.AppendBinary(nil),
		"a short key":      shortKey.AppendBinary(nil),
		"huge poll":        {1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"non-minimal seq":  append(append(append([]byte{1}, good[1:1+1+len("p")+1+len("eu-1")]...), 0x83, 0x00), good[1+1+len("p")+1+len("eu-1")+1:]...),
	} {
		if _, err := DecodeSignedHead(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

func FuzzDecodeSignedHead(f *testing.F) {
	h := headOf(newKey(f), chainOf("eu-1", 2))
	f.Add(h.AppendBinary(nil))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeSignedHead(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if !bytes.Equal(h.AppendBinary(nil), b) {
			t.Fatal("two encodings of one head")
		}
	})
}

// readHeads reads a stream, returning its records, heads and first error.
func readHeads(b []byte) (recs []Record, heads []*SignedHead, err error) {
	for r, e := range ReadStreamHeads(bytes.NewReader(b), func(h *SignedHead) { heads = append(heads, h) }) {
		if e != nil {
			return recs, heads, e
		}
		recs = append(recs, r)
	}
	return recs, heads, nil
}

// streamOf writes recs in the stream format, then each head in turn.
func streamOf(recs []Record, heads ...*SignedHead) []byte {
	var buf bytes.Buffer
	WriteStreamHead(&buf, RecordsOf(recs), nil)
	for _, h := range heads {
		var hb bytes.Buffer
		WriteStreamHead(&hb, RecordsOf(nil), h)
		buf.Write(hb.Bytes()[len(streamMagic):])
	}
	return buf.Bytes()
}

// A record stream carries a signed head after its chain's last record;
// the reader hands it over once checked, and refuses a head that does not
// verify, is not the head of the record before it, or comes twice, and a
// record of its chain after it.
func TestStreamCarriesASignedHead(t *testing.T) {
	key := newKey(t)
	recs := chainOf("eu-1", 4)
	h := headOf(key, recs)
	var buf bytes.Buffer
	if n, err := WriteStreamHead(&buf, RecordsOf(recs), &h); err != nil || n != 4 {
		t.Fatalf("write: %d %v", n, err)
	}
	got, heads, err := readHeads(buf.Bytes())
	if err != nil || len(got) != 4 || len(heads) != 1 || !reflect.DeepEqual(*heads[0], h) {
		t.Fatalf("read %d records, heads %v: %v", len(got), heads, err)
	}
	if _, err := VerifyChains(ReadStream(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatalf("a reader that does not ask for heads: %v", err)
	}

	flipped := h
	flipped.Sig = bytes.Clone(h.Sig)
	flipped.Sig[0] ^= 1
	early := headOf(key, recs[:3])
	other := headOf(key, chainOf("us-1", 4))
	otherPoll := h
	otherPoll.Poll = "q"
	otherPoll = SignHead(key, "q", "eu-1", 4, h.Hash)
	cases := map[string][]byte{
		"signature flipped":        streamOf(recs, &flipped),
		"head of an earlier seq":   streamOf(recs, &early),
		"head before any record":   streamOf(nil, &h),
		"another replica's head":   streamOf(recs, &other),
		"another poll's head":      streamOf(recs, &otherPoll),
		"two heads":                streamOf(recs, &h, &h),
		"record after its head":    append(streamOf(recs[:3], &early), streamOf(recs[3:])[len(streamMagic):]...),
		"head truncated":           streamOf(recs, &h)[:buf.Len()-1],
		"head of a huge length":    append(streamOf(recs), 0, 0xff, 0xff, 0x03),
		"head of noise":            append(streamOf(recs), 0, 3, 1, 2, 3),
		"a zero length at the end": append(streamOf(recs), 0),
	}
	for name, b := range cases {
		if _, _, err := readHeads(b); !errors.Is(err, ErrChain) && !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrChain or ErrMalformed", name, err)
		}
	}
	// Another key's head of the same records reads: whose key it is, the
	// caller judges (certification: the key the replica is known by).
	stranger := headOf(newKey(t), recs)
	if _, heads, err := readHeads(streamOf(recs, &stranger)); err != nil || bytes.Equal(heads[0].Pub, h.Pub) {
		t.Fatalf("another key's head: %v", err)
	}
}

// ImportSigned keeps a signed head in the batch that stores its records:
// after a crash that drops what was not fsynced, records and head are
// there together or not at all. A head of records held already is kept
// where it is still its chain's head, and not over a later one.
func TestImportSignedKeepsTheHeadWithItsRecords(t *testing.T) {
	key := newKey(t)
	recs := chainOf("eu-1", 6)
	fs := vfs.NewStrictMem()
	l, err := Open(Config{Dir: "copies", FS: fs, NoIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.ImportSigned(recs[:4], []SignedHead{headOf(key, recs[:4])}); err != nil {
		t.Fatal(err)
	}
	fs.SetIgnoreSyncs(true) // what follows is lost in the crash
	l.ImportSigned(recs[4:], []SignedHead{headOf(key, recs)})
	fs.ResetToSyncedState()
	l.Close()
	fs.SetIgnoreSyncs(false)
	if l, err = Open(Config{Dir: "copies", FS: fs, NoIndex: true}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	check := func(want uint64) {
		t.Helper()
		n, last, _ := l.Head("p", "eu-1")
		h, ok, err := l.SignedHead("p", "eu-1")
		if err != nil || !ok || n != want || h.Seq != want || h.Hash != last || !h.Verify() {
			t.Fatalf("chain of %d, signed head %+v %v %v; want both at %d", n, h.Seq, ok, err, want)
		}
	}
	check(4)
	// The records again, then an older one again: the latest head stays.
	if _, err := l.ImportSigned(recs[3:], []SignedHead{headOf(key, recs)}); err != nil {
		t.Fatal(err)
	}
	check(6)
	if st, err := l.ImportSigned(recs[1:2], []SignedHead{headOf(key, recs[:2])}); err != nil || st.Present != 1 {
		t.Fatalf("%+v %v", st, err)
	}
	check(6)
	if _, ok, err := l.SignedHead("p", "us-1"); ok || err != nil {
		t.Fatalf("a chain without a head: %v %v", ok, err)
	}

	more := chainOf("eu-1", 8)
	flipped := headOf(key, more[:7])
	flipped.Sig[3] ^= 1
	for name, heads := range map[string][]SignedHead{
		"a head of no record it comes with": {headOf(key, more[:8])},
		"a head that does not verify":       {flipped},
		"a head of another hash":            {SignHead(key, "p", "eu-1", 7, Hash{1})},
	} {
		if _, err := l.ImportSigned(more[6:7], heads); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	check(6) // nothing of the refused imports was written
	if _, err := l.ImportSigned(nil, []SignedHead{headOf(key, recs)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("heads alone: %v", err)
	}
}

func FuzzReadStreamHeads(f *testing.F) {
	key := newKey(f)
	recs := chainOf("eu-1", 2)
	h := headOf(key, recs)
	f.Add(streamOf(recs, &h))
	f.Add(streamOf(recs[:1], &h))
	f.Fuzz(func(t *testing.T, b []byte) {
		var last *Record
		for r, err := range ReadStreamHeads(bytes.NewReader(b), func(h *SignedHead) {
			if last == nil || h.Seq != last.Seq || h.Hash != last.Hash() || !h.Verify() {
				t.Fatalf("a head that is not the record before it's, or does not verify: %+v", h)
			}
		}) {
			if err != nil {
				return
			}
			if err := r.Validate(); err != nil {
				t.Fatalf("reader yielded an invalid record: %v", err)
			}
			last = &r
		}
	})
}
