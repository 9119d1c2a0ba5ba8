package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// exportOf appends votes to a fresh ledger and returns its export of poll.
func exportOf(t *testing.T, replica, poll string, n int) []byte {
	t.Helper()
	l := openMem(t, nil, replica)
	for i := range n {
		if _, err := l.Append(vote(poll, idem(i%7), []string{"red", "blue"}[i%2], replica+idem(i), int64(100+i))); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if got, err := l.Export(&buf, poll); err != nil || got != n {
		t.Fatalf("export wrote %d, %v", got, err)
	}
	return buf.Bytes()
}

func TestExportImportRoundTrip(t *testing.T) {
	eu := exportOf(t, "eu-1", "p", 20)
	us := exportOf(t, "us-1", "p", 10)

	hub := openMem(t, nil, "ap-1")
	for _, exp := range [][]byte{eu, us, eu} { // the second eu import is a no-op
		if _, err := hub.Import(ReadNDJSON(bytes.NewReader(exp))); err != nil {
			t.Fatal(err)
		}
	}
	chains, err := VerifyChains(hub.Scan("p"))
	if err != nil || len(chains) != 2 || chains[0].Records != 20 || chains[1].Records != 10 {
		t.Fatalf("chains %+v, %v", chains, err)
	}
	var again bytes.Buffer
	hub.Export(&again, "p")
	if !bytes.Equal(again.Bytes(), append(append([]byte{}, eu...), us...)) {
		t.Fatal("re-export differs from the concatenated originals")
	}
	// Reconcile of the hub's ledger equals reconcile of the two files.
	a, err := Reconcile(hub.Scan("p"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Reconcile(ReadNDJSON(bytes.NewReader(us)), ReadNDJSON(bytes.NewReader(eu)))
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest {
		t.Fatalf("digests differ: %s vs %s", a.Digest, b.Digest)
	}
	// The hub can still append its own votes after importing.
	if _, err := hub.Append(vote("p", "v", "red", "hub-1", 500)); err != nil {
		t.Fatal(err)
	}
}

func TestImportRefusesBrokenAndConflictingChains(t *testing.T) {
	exp := exportOf(t, "eu-1", "p", 5)
	lines := strings.SplitAfter(string(exp), "\n")
	// Same replica id, different records: what a node that lost its disk
	// and reused its id would produce.
	reused := openMem(t, nil, "eu-1")
	reused.Append(vote("p", "someone", "red", "fresh", 999))
	var other bytes.Buffer
	reused.Export(&other, "p")

	hub := openMem(t, nil, "")
	gap := lines[0] + lines[2]
	if _, err := hub.Import(ReadNDJSON(strings.NewReader(gap))); !errors.Is(err, ErrChain) {
		t.Fatalf("gap: err = %v, want ErrChain", err)
	}
	if _, err := hub.Import(ReadNDJSON(bytes.NewReader(exp))); err != nil {
		t.Fatalf("a refused chunk must leave the ledger usable: %v", err)
	}
	if _, err := hub.Import(ReadNDJSON(&other)); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflict: err = %v, want ErrConflict", err)
	}
	if chains, err := VerifyChains(hub.Scan("p")); err != nil || chains[0].Records != 5 {
		t.Fatalf("after refused imports: %+v %v", chains, err)
	}
}

func TestReadNDJSONRejectsHostileInput(t *testing.T) {
	exp := string(exportOf(t, "eu-1", "p", 3))
	lines := strings.SplitAfter(exp, "\n")
	q := exportOf(t, "eu-1", "q", 1)
	cases := []struct {
		name string
		in   string
		want error
	}{
		{"truncated last line", exp[:len(exp)-20], ErrMalformed},
		{"not json", "hello\n", ErrMalformed},
		{"unknown field", strings.Replace(lines[0], `{"poll"`, `{"extra":1,"poll"`, 1), ErrMalformed},
		{"trailing data", strings.TrimSuffix(lines[0], "\n") + " {}\n", ErrMalformed},
		{"tampered option", strings.Replace(lines[0], `"option":"red"`, `"option":"blue"`, 1), ErrChain},
		{"record from another poll", lines[0] + string(q), ErrInvalid},
		{"huge line", `{"poll":"` + strings.Repeat("x", 10*MaxLineBytes) + "\"}\n", ErrMalformed},
		{"bad hlc", strings.Replace(lines[0], `"hlc":"100.0"`, `"hlc":"100"`, 1), ErrMalformed},
		{"invalid poll id", strings.Replace(lines[0], `"poll":"p"`, `"poll":"p q"`, 1), ErrInvalid},
		{"trust out of range", strings.Replace(lines[0], `"trust":1`, `"trust":7`, 1), ErrInvalid},
		{"seq zero", strings.Replace(lines[0], `"seq":1`, `"seq":0`, 1), ErrInvalid},
		{"duplicate key", strings.Replace(lines[0], `{"poll":"p"`, `{"poll":"p","poll":"p"`, 1), ErrMalformed},
		{"duplicate key, last differs", strings.Replace(lines[0], `{"poll":"p"`, `{"poll":"q","poll":"p"`, 1), ErrMalformed},
		{"key in another case", strings.Replace(lines[0], `"voter"`, `"Voter"`, 1), ErrMalformed},
		{"invalid utf-8", strings.Replace(lines[0], `"ip_hash":"`, "\"ip_hash\":\"\xff", 1), ErrMalformed},
		{"repeated line", lines[0] + lines[1] + lines[1] + lines[2], ErrChain},
		{"swapped lines", lines[0] + lines[2] + lines[1], ErrChain},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := VerifyChains(ReadNDJSON(strings.NewReader(c.in)))
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), "line ") {
				t.Fatalf("error does not name the line: %v", err)
			}
		})
	}
	// A chain broken between lines: each line is fine alone.
	if _, err := VerifyChains(ReadNDJSON(strings.NewReader(lines[0] + lines[2]))); !errors.Is(err, ErrChain) {
		t.Fatalf("broken chain: err = %v", err)
	}
	if _, err := VerifyChains(ReadNDJSON(strings.NewReader(lines[1]))); !errors.Is(err, ErrChain) {
		t.Fatalf("chain not starting at 1: err = %v", err)
	}
}

func TestRecordBinaryRoundTripAndHostile(t *testing.T) {
	r := vote("p", "voter ✓", "red", "k", 1733000000000)
	r.Replica, r.Seq, r.Logical, r.Late = "eu-1", 7, 3, true
	r.Prev[0] = 9
	enc := r.AppendBinary(nil)
	got, err := DecodeRecord(enc)
	if err != nil || got != r {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	bad := map[string][]byte{
		"empty":       nil,
		"version":     append([]byte{9}, enc[1:]...),
		"truncated":   enc[:len(enc)-1],
		"trailing":    append(append([]byte{}, enc...), 0),
		"huge string": {1, 0xff, 0xff, 0xff, 0xff, 0x0f},
	}
	for name, b := range bad {
		if _, err := DecodeRecord(b); !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	r := vote("p", "v", "o", "k", 5)
	r.Replica, r.Seq = "eu-1", 1
	f.Add(r.AppendBinary(nil))
	r.Answer = &Answer{ElapsedMs: 1234, Score: 969, RTTMs: -1}
	r.Signals = &Signals{SincePrevMs: 5, TokenAgeMs: -1, SocketAgeMs: 3}
	f.Add(r.AppendBinary(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if back, err := DecodeRecord(rec.AppendBinary(nil)); err != nil || !reflect.DeepEqual(back, rec) {
			t.Fatalf("re-encoding does not round-trip: %v", err)
		}
	})
}

func FuzzReadNDJSON(f *testing.F) {
	l := vote("p", "v", "o", "k", 5)
	l.Replica, l.Seq = "eu-1", 1
	line, _ := l.MarshalJSON()
	f.Add(append(line, '\n'))
	f.Add([]byte("{}\n\n{"))
	f.Add(append([]byte(`{"close":{"poll":"p","closes_at":5,"first_wins":true}}`+"\n"), append(line, '\n')...))
	f.Fuzz(func(t *testing.T, b []byte) {
		for rec, err := range ReadNDJSON(bytes.NewReader(b)) {
			if err != nil {
				return
			}
			if err := rec.Validate(); err != nil {
				t.Fatalf("reader yielded an invalid record: %v", err)
			}
		}
	})
}

func TestStreamRoundTripAndTampering(t *testing.T) {
	var recs []Record
	ch := chainer{}
	for i := range 5 {
		r := vote("p", fmt.Sprintf("v%d", i), "o", fmt.Sprintf("k%d", i), int64(10+i))
		r.Replica = "eu-1"
		recs = append(recs, ch.add(r))
	}
	var buf bytes.Buffer
	if n, err := WriteStream(&buf, RecordsOf(recs)); err != nil || n != 5 {
		t.Fatalf("write: %d %v", n, err)
	}
	good := buf.Bytes()
	var got []Record
	for r, err := range ReadStream(bytes.NewReader(good)) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if len(got) != 5 || got[4].Hash() != recs[4].Hash() {
		t.Fatalf("round trip: %d records", len(got))
	}
	last := len(good) - 40 // inside the last record, before its hash
	cases := map[string][]byte{
		"no magic":            good[len(streamMagic):],
		"truncated":           good[:len(good)-5],
		"last record altered": append(append(append([]byte(nil), good[:last]...), good[last]^1), good[last+1:]...),
		"hash altered":        append(append([]byte(nil), good[:len(good)-1]...), good[len(good)-1]^1),
		"huge length":         append([]byte(streamMagic), 0xff, 0xff, 0xff, 0xff, 0x0f),
	}
	for name, b := range cases {
		var err error
		for _, e := range ReadStream(bytes.NewReader(b)) {
			if e != nil {
				err = e
			}
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzReadStream(f *testing.F) {
	r := vote("p", "v", "o", "k", 5)
	r.Replica, r.Seq = "eu-1", 1
	var buf bytes.Buffer
	WriteStream(&buf, RecordsOf([]Record{r}))
	f.Add(buf.Bytes())
	f.Add([]byte(streamMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		for rec, err := range ReadStream(bytes.NewReader(b)) {
			if err != nil {
				return
			}
			if err := rec.Validate(); err != nil {
				t.Fatalf("reader yielded an invalid record: %v", err)
			}
		}
	})
}

// TestSignalsRoundTrip: a record's trust signals survive the binary form,
// the NDJSON export and the stream, and are covered by its hash.
func TestSignalsRoundTrip(t *testing.T) {
	r := vote("p", "v", "o", "k", 5)
	r.Replica, r.Seq = "eu-1", 1
	plain := r.Hash()
	r.Signals = &Signals{SincePrevMs: 1200, IPVotesPerMin: 640, IPVoters: 3, TokenAgeMs: -1, SocketAgeMs: 800, Datacenter: true, OverBudget: true}
	if r.Hash() == plain {
		t.Fatal("signals are not covered by the hash")
	}
	back, err := DecodeRecord(r.AppendBinary(nil))
	if err != nil || back.Signals == nil || *back.Signals != *r.Signals || back.Hash() != r.Hash() {
		t.Fatalf("binary: %+v %v", back.Signals, err)
	}
	line, _ := r.MarshalJSON()
	fromJSON, err := DecodeRecordJSON(line)
	if err != nil || fromJSON.Signals == nil || *fromJSON.Signals != *r.Signals {
		t.Fatalf("json %s: %+v %v", line, fromJSON.Signals, err)
	}
	bad := r.AppendBinary(nil)
	bad[len(bad)-1] = 7 // an unknown signal flag
	if _, err := DecodeRecord(bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown signal flag: %v", err)
	}
	// A record written before the budget's flag (the byte 0 or 1) decodes
	// as it did, hash and all.
	r.Signals.OverBudget = false
	if back, err := DecodeRecord(r.AppendBinary(nil)); err != nil || back.Signals.OverBudget || !back.Signals.Datacenter || back.Hash() != r.Hash() {
		t.Fatalf("an older record: %+v %v", back.Signals, err)
	}
}

// TestCloseLine: an export's close line is read once, before the records
// of its poll; a malformed, repeated or foreign one is refused.
func TestCloseLine(t *testing.T) {
	r := vote("p", "v", "o", "k", 5)
	r.Replica, r.Seq = "eu-1", 1
	line, _ := r.MarshalJSON()
	var good bytes.Buffer
	if err := WriteClose(&good, PollClose{Poll: "p", ClosesAt: 99, FirstWins: true}); err != nil {
		t.Fatal(err)
	}
	good.Write(append(line, '\n'))
	var got []PollClose
	n := 0
	for _, err := range ReadExport(bytes.NewReader(good.Bytes()), ExportHooks{Close: func(c PollClose) { got = append(got, c) }}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 || len(got) != 1 || got[0] != (PollClose{Poll: "p", ClosesAt: 99, FirstWins: true}) {
		t.Fatalf("read %d records and closes %v", n, got)
	}
	closeLine := `{"close":{"poll":"p","closes_at":99}}` + "\n"
	for name, in := range map[string]string{
		"two close lines":   closeLine + closeLine,
		"another poll's":    `{"close":{"poll":"q","closes_at":99}}` + "\n" + string(line) + "\n",
		"after the records": string(line) + "\n" + `{"close":{"poll":"x","closes_at":99}}` + "\n",
		"unknown field":     `{"close":{"poll":"p","closes_at":99,"extra":1}}` + "\n",
		"no close time":     `{"close":{"poll":"p"}}` + "\n",
		"negative":          `{"close":{"poll":"p","closes_at":-1}}` + "\n",
		"bad poll id":       `{"close":{"poll":"../x","closes_at":9}}` + "\n",
		"null":              `{"close":null}` + "\n",
	} {
		failed := false
		for _, err := range ReadNDJSON(strings.NewReader(in)) {
			failed = failed || err != nil
		}
		if !failed {
			t.Errorf("%s: read without an error", name)
		}
	}
}
