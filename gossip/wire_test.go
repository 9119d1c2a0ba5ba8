package gossip

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"tally/crdt"
	"tally/hlc"
	"tally/internal/wire"
	"tally/poll"
	"tally/state"
)

func sampleMessage(polls int) *Message {
	m := &Message{Kind: KindFull, Replica: "eu-1", Region: "eu-west", Sent: hlc.Timestamp{Wall: 1764500000000, Logical: 3, Replica: "eu-1"}}
	for i := range polls {
		id := fmt.Sprintf("poll-%d", i)
		d := testPoll(id)
		t := crdt.NewTally()
		t.Add("eu-1", "a", int64(i+1))
		t.Add("us-1", "b", 2)
		t.AddRecords("eu-1", uint64(i+1))
		u := PollUpdate{ID: id, Def: &crdt.Register[poll.Definition]{TS: hlc.Timestamp{Wall: 5, Replica: "eu-1"}, Value: d}, Tally: t}
		for j := range i % 4 {
			u.Ballots = append(u.Ballots, crdt.Ballot{Replica: []string{"eu-1", "us-1"}[j%2], Seq: uint64(j + 1), Wall: 1764500000000 - int64(j*7),
				Logical: uint32(j), Voter: uint64(i*100 + j), Idem: ^uint64(j), Option: []string{"a", "b"}[j%2], Eligible: j != 2})
		}
		if i%2 == 0 {
			u.Cert = &state.Certificate{Poll: id, Status: state.Reconciled, TS: hlc.Timestamp{Wall: 9, Replica: "eu-1"}, By: "eu-1",
				Totals: map[string]uint64{"a": uint64(i)}, Total: uint64(i), Digest: "abc"}
		}
		m.Polls = append(m.Polls, u)
	}
	zero, many := int64(0), int64(maxViewers)
	m.Polls = append(m.Polls, PollUpdate{ID: "bare"}, PollUpdate{ID: "nobody-watches", Viewers: &zero}, PollUpdate{ID: "crowd", Viewers: &many})
	return m
}

func TestWireRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 50} { // 50 polls pass the compression threshold
		m := sampleMessage(n)
		b, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		if deflated := b[len(wireMagic)+1] == flagDeflated; deflated != (n == 50) {
			t.Errorf("%d polls: deflated=%v", n, deflated)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%d polls: %v", n, err)
		}
		if got.Kind != m.Kind || got.Replica != m.Replica || got.Region != m.Region || got.Sent != m.Sent || len(got.Polls) != len(m.Polls) {
			t.Fatalf("%d polls: header %+v", n, got)
		}
		for i, p := range m.Polls {
			g := got.Polls[i]
			if g.ID != p.ID || (g.Def == nil) != (p.Def == nil) || (g.Tally == nil) != (p.Tally == nil) {
				t.Fatalf("poll %d: %+v", i, g)
			}
			if p.Def != nil && (g.Def.TS != p.Def.TS || g.Def.Value.Question != p.Def.Value.Question) {
				t.Fatalf("poll %d def: %+v", i, g.Def)
			}
			if p.Tally != nil && !g.Tally.Equal(p.Tally) {
				t.Fatalf("poll %d tally differs", i)
			}
			if (g.Cert == nil) != (p.Cert == nil) || p.Cert != nil && (g.Cert.Digest != p.Cert.Digest || g.Cert.Totals["a"] != p.Cert.Totals["a"]) {
				t.Fatalf("poll %d certificate: %+v", i, g.Cert)
			}
			if (g.Viewers == nil) != (p.Viewers == nil) || p.Viewers != nil && *g.Viewers != *p.Viewers {
				t.Fatalf("poll %d viewers: %v, want %v", i, g.Viewers, p.Viewers)
			}
			if !slices.Equal(g.Ballots, p.Ballots) {
				t.Fatalf("poll %d ballots: %+v, want %+v", i, g.Ballots, p.Ballots)
			}
		}
	}
}

func TestDecodeHostile(t *testing.T) {
	good, _ := Encode(sampleMessage(1))
	body := good[headerLength:]
	deflate := func(b []byte) []byte {
		var buf bytes.Buffer
		w, _ := flate.NewWriter(&buf, flate.BestSpeed)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	header := func(kind, flags byte) []byte { return append([]byte(wireMagic), kind, flags) }
	withDef := func(def string) []byte {
		m := &Message{Kind: KindDelta, Replica: "r", Region: "g", Sent: hlc.Timestamp{Wall: 1}}
		b, _ := Encode(m)
		b = b[:len(b)-1] // poll count 0
		b = append(b, 1)
		b = wire.AppendString(b, "p")
		b = wire.AppendBytes(b, []byte(def))
		return append(wire.AppendBytes(wire.AppendBytes(wire.AppendBytes(b, nil), nil), nil), 0) // no viewers
	}
	validDef := `{"ts":{"wall":5,"logical":0,"replica":"r"},"value":{"id":"p","question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"opens_at":1796083200000,"closes_at":1796083260000}}`
	withCert := func(cert string) []byte {
		b := withDef(validDef)
		b = b[:len(b)-3] // no certificate, no ballots, no viewers
		return append(wire.AppendBytes(wire.AppendBytes(b, []byte(cert)), nil), 0)
	}
	withBallots := func(raw []byte) []byte {
		b := withDef(validDef)
		return append(wire.AppendBytes(b[:len(b)-2], raw), 0)
	}
	withViewers := func(v uint64) []byte {
		b := withDef(validDef)
		return binary.AppendUvarint(b[:len(b)-1], v)
	}
	if m, err := Decode(withViewers(1 + 42)); err != nil || m.Polls[0].Viewers == nil || *m.Polls[0].Viewers != 42 {
		t.Fatalf("the valid viewers case fails: %v", err)
	}
	for _, v := range []uint64{maxViewers + 2, math.MaxUint64} {
		if _, err := Decode(withViewers(v)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%d viewers: %v", v, err)
		}
	}
	oneBallot := func(edit func(b []byte) []byte) []byte {
		b := appendBallots(nil, []crdt.Ballot{{Replica: "r", Seq: 1, Wall: 5, Voter: 1, Idem: 2, Option: "a", Eligible: true}})
		return edit(b)
	}
	if m, err := Decode(withBallots(oneBallot(func(b []byte) []byte { return b }))); err != nil || len(m.Polls[0].Ballots) != 1 {
		t.Fatalf("the valid ballots case fails: %v", err)
	}
	if _, err := Decode(withDef(validDef)); err != nil {
		t.Fatalf("the valid base case fails: %v", err)
	}
	if m, err := Decode(withCert(`{"poll":"p","status":"pending","ts":{"wall":5},"by":"r","reason":"r2 down"}`)); err != nil || m.Polls[0].Cert.Reason != "r2 down" {
		t.Fatalf("the valid certificate case fails: %v", err)
	}
	cases := map[string][]byte{
		"empty":                    nil,
		"magic only":               []byte(wireMagic),
		"wrong magic":              append([]byte("XX1"), good[3:]...),
		"unknown kind":             append(header(7, 0), body...),
		"unknown flag":             append(header(2, 2), body...),
		"truncated":                good[:len(good)-3],
		"trailing":                 append(append([]byte(nil), good...), 0),
		"bad deflate":              append(header(2, flagDeflated), 1, 2, 3),
		"deflate bomb":             append(header(2, flagDeflated), deflate(make([]byte, MaxMessage+10))...),
		"huge poll count":          append(header(1, 0), append(wire.AppendString(wire.AppendString(nil, "r"), "g"), 1, 0, 0xff, 0xff, 0xff, 0x7f)...),
		"bad replica id":           append(header(1, 0), append(wire.AppendString(wire.AppendString(nil, "r/x"), "g"), 1, 0, 0)...),
		"empty region":             append(header(1, 0), append(wire.AppendString(wire.AppendString(nil, "r"), ""), 1, 0, 0)...),
		"long id":                  append(header(1, 0), append(wire.AppendString(wire.AppendString(nil, strings.Repeat("r", 65)), "g"), 1, 0, 0)...),
		"def not json":             withDef("{"),
		"def unknown key":          withDef(strings.Replace(validDef, `"value"`, `"x":1,"value"`, 1)),
		"def other poll":           withDef(strings.Replace(validDef, `"id":"p"`, `"id":"q"`, 1)),
		"def no timestamp":         withDef(strings.Replace(validDef, `"wall":5`, `"wall":0`, 1)),
		"def invalid":              withDef(strings.Replace(validDef, `,{"id":"b","label":"B"}`, ``, 1)),
		"def trailing":             withDef(validDef + "{}"),
		"cert not json":            withCert("["),
		"cert other poll":          withCert(`{"poll":"q","status":"pending","ts":{"wall":5},"by":"r"}`),
		"cert no status":           withCert(`{"poll":"p","status":"maybe","ts":{"wall":5},"by":"r"}`),
		"cert no digest":           withCert(`{"poll":"p","status":"reconciled","ts":{"wall":5},"by":"r"}`),
		"cert unknown key":         withCert(`{"poll":"p","status":"pending","ts":{"wall":5},"by":"r","x":1}`),
		"ballots garbage":          withBallots([]byte{0xff, 0xff}),
		"ballot truncated":         withBallots(oneBallot(func(b []byte) []byte { return b[:len(b)-3] })),
		"ballot trailing":          withBallots(oneBallot(func(b []byte) []byte { return append(b, 0) })),
		"ballot seq 0":             withBallots(bytes.Replace(oneBallot(func(b []byte) []byte { return b }), []byte{0, 0, 1, 10}, []byte{0, 0, 0, 10}, 1)),
		"ballot bad replica index": withBallots(bytes.Replace(oneBallot(func(b []byte) []byte { return b }), []byte{0, 0, 1, 10}, []byte{5, 0, 1, 10}, 1)),
		"ballot eligible 7":        withBallots(oneBallot(func(b []byte) []byte { b[len(b)-1] = 7; return b })),
		"ballot bad replica":       withBallots(append(wire.AppendString([]byte{1}, "r/x"), 0, 0)),
		"a million ballots":        withBallots(append(wire.AppendString(wire.AppendString([]byte{1}, "r"), "a")[:0:0], append(append(wire.AppendString([]byte{1}, "r"), append([]byte{1}, wire.AppendString(nil, "a")...)...), 0xc0, 0x84, 0x3d)...)),
	}
	for name, b := range cases {
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, n := range []int{0, 1, 50} {
		b, _ := Encode(sampleMessage(n))
		f.Add(b)
	}
	f.Add([]byte(wireMagic + "\x01\x00"))
	withJoiners := sampleMessage(1)
	withJoiners.Polls[0].Joiners = []state.Joiner{{Name: "Zoë", AtMs: 5, Seq: 1, Holder: 9}}
	b, _ := Encode(withJoiners)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not ErrMalformed: %v", err)
			}
			return
		}
		// What decodes re-encodes and decodes to the same message.
		again, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if len(m2.Polls) != len(m.Polls) || m2.Replica != m.Replica || m2.Sent != m.Sent {
			t.Fatal("round trip changed the message")
		}
		for i := range m.Polls {
			if (m.Polls[i].Tally == nil) != (m2.Polls[i].Tally == nil) || m.Polls[i].Tally != nil && !m.Polls[i].Tally.Equal(m2.Polls[i].Tally) {
				t.Fatal("round trip changed a tally")
			}
		}
	})
}

// BenchmarkBallotWire: the bytes a ballot costs in a NATS delta (100 ms
// of one node's votes at 30,000 votes/s: 3,000 ballots, HLC walls a few
// ms apart, random hashes), deflated as sent, and the time to encode and
// decode it.
func BenchmarkBallotWire(b *testing.B) {
	const n = 3000
	rng := rand.New(rand.NewPCG(1, 2))
	var bs []crdt.Ballot
	wall := int64(1764500000000)
	for i := range n {
		wall += int64(rng.IntN(2))
		bs = append(bs, crdt.Ballot{Replica: "eu-west-3f9c2a10", Seq: uint64(100_000 + i), Wall: wall, Logical: uint32(rng.IntN(3)),
			Voter: rng.Uint64(), Idem: rng.Uint64(), Option: []string{"red", "green", "blue", "gold"}[rng.IntN(4)], Eligible: rng.IntN(50) != 0})
	}
	m := &Message{Kind: KindDelta, Replica: "eu-west-3f9c2a10", Region: "eu-west", Sent: hlc.Timestamp{Wall: wall}, Polls: []PollUpdate{{ID: "final", Ballots: bs}}}
	var size int
	for b.Loop() {
		out, err := Encode(m)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Decode(out); err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size)/n, "wire-bytes/ballot")
	b.ReportMetric(float64(len(appendBallots(nil, bs)))/n, "raw-bytes/ballot")
}

// FuzzDecodeBudget: the token budget decoder never panics, refuses what it
// cannot read, and what it accepts encodes back to the same bytes.
func FuzzDecodeBudget(f *testing.F) {
	f.Add(EncodeBudget(&BudgetMessage{Replica: "eu-1", Sent: hlc.Timestamp{Wall: 1_800_000_000_000, Logical: 3},
		Entries: []state.BudgetEntry{{Group: 1, Minute: 30_000_000, N: 7}, {Group: 1 << 63, Minute: 30_000_001, N: 1}}}))
	f.Add([]byte(budgetMagic))
	f.Add([]byte("TB1\x04eu-1\x00\x00\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeBudget(b)
		if err != nil {
			return
		}
		if got := EncodeBudget(m); !bytes.Equal(got, b) {
			t.Fatalf("decoded %+v re-encodes to %x, not %x", m, got, b)
		}
	})
}

// TestDecodeBudgetRefusesHostileInput: wrong magic, truncation, a count
// larger than the bytes, trailing bytes, a bad replica id.
func TestDecodeBudgetRefusesHostileInput(t *testing.T) {
	good := EncodeBudget(&BudgetMessage{Replica: "eu-1", Entries: []state.BudgetEntry{{Group: 9, Minute: 5, N: 2}}})
	for name, b := range map[string][]byte{
		"empty": nil, "magic": []byte("TG4"), "truncated": good[:len(good)-1], "trailing": append(bytes.Clone(good), 0),
		"huge count": []byte("TB1\x04eu-1\x00\x00\xff\xff\x03"), "bad id": EncodeBudget(&BudgetMessage{Replica: "a b"}),
	} {
		if _, err := DecodeBudget(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if m, err := DecodeBudget(good); err != nil || len(m.Entries) != 1 || m.Entries[0].N != 2 {
		t.Fatalf("good: %+v %v", m, err)
	}
}

// The newest joiners of a quiz's lobby travel in a TG6 message, each with
// who they are (their holder); a message without them is still TG4, which
// the releases before read, and a TG5 one (joiners without holders) is
// still read. Hostile joiners (too many, a name that is no display name,
// a time out of range, truncated) are malformed.
func TestWireJoiners(t *testing.T) {
	plain, _ := Encode(sampleMessage(1))
	if string(plain[:len(wireMagic)]) != wireMagic {
		t.Fatalf("a message without joiners is %q, want %s", plain[:3], wireMagic)
	}
	m := sampleMessage(1)
	js := []state.Joiner{{Name: "Zoë", AtMs: 1796040001000, Seq: 7, Holder: math.MaxUint64}, {Name: strings.Repeat("ü", 40), AtMs: 1796040000000, Seq: 3, Holder: 0x1234}}
	m.Polls[0].Joiners = js
	m.Polls[1].Joiners = []state.Joiner{} // a report of none
	b, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:len(wireMagicHolders)]) != wireMagicHolders {
		t.Fatalf("a message with joiners is %q, want %s", b[:3], wireMagicHolders)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Polls[0].Joiners, js) || got.Polls[1].Joiners == nil || len(got.Polls[1].Joiners) != 0 || got.Polls[2].Joiners != nil {
		t.Fatalf("joiners: %+v / %+v / %+v", got.Polls[0].Joiners, got.Polls[1].Joiners, got.Polls[2].Joiners)
	}
	if _, err := Encode(&Message{Kind: KindDelta, Replica: "r", Region: "g", Sent: hlc.Timestamp{Wall: 1},
		Polls: []PollUpdate{{ID: "p", Joiners: make([]state.Joiner, state.MaxJoiners+1)}}}); err == nil {
		t.Fatal("encoded more joiners than a report holds")
	}
	// One poll, no parts, then the joiners as given (TG5: no holders).
	withJoiners := func(raw []byte) []byte {
		m := &Message{Kind: KindDelta, Replica: "r", Region: "g", Sent: hlc.Timestamp{Wall: 1}}
		b, _ := Encode(m)
		b = append([]byte(wireMagicJoiners), b[len(wireMagic):len(b)-1]...)
		b = append(b, 1)
		b = wire.AppendString(b, "p")
		b = append(wire.AppendBytes(wire.AppendBytes(wire.AppendBytes(wire.AppendBytes(b, nil), nil), nil), nil), 0)
		return append(b, raw...)
	}
	joiner := func(name string, at uint64) []byte {
		return binary.AppendUvarint(binary.AppendUvarint(wire.AppendString(nil, name), at), 1)
	}
	if m, err := Decode(withJoiners(append([]byte{2}, joiner("Ann", 5)...))); err != nil || len(m.Polls[0].Joiners) != 1 || m.Polls[0].Joiners[0].Name != "Ann" || m.Polls[0].Joiners[0].Holder != 0 {
		t.Fatalf("the valid joiner case fails: %v", err)
	}
	tg6 := withJoiners(binary.AppendUvarint(append([]byte{2}, joiner("Ann", 5)...), 42))
	copy(tg6, wireMagicHolders)
	if m, err := Decode(tg6); err != nil || len(m.Polls[0].Joiners) != 1 || m.Polls[0].Joiners[0].Holder != 42 {
		t.Fatalf("a TG6 joiner: %v", err)
	}
	if _, err := Decode(tg6[:len(tg6)-1]); !errors.Is(err, ErrMalformed) {
		t.Errorf("a TG6 joiner without its holder: %v", err)
	}
	for name, raw := range map[string][]byte{
		"too many":      append([]byte{state.MaxJoiners + 2}, bytes.Repeat(joiner("Ann", 5), state.MaxJoiners+1)...),
		"bidi name":     append([]byte{2}, joiner("Ann\u202e", 5)...),
		"blank name":    append([]byte{2}, joiner("\u3164", 5)...),
		"empty name":    append([]byte{2}, joiner("", 5)...),
		"long name":     append([]byte{2}, joiner(strings.Repeat("n", 41), 5)...),
		"time overflow": append([]byte{2}, joiner("Ann", math.MaxUint64)...),
		"truncated":     append([]byte{3}, joiner("Ann", 5)...),
		"huge count":    binary.AppendUvarint(nil, math.MaxUint64),
	} {
		if _, err := Decode(withJoiners(raw)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
