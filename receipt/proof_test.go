package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"tally/internal/race"
	"tally/ledger"
)

// fixtureSetup is the fixture's certified poll, its replicas' keys and
// the keys as Verify takes them.
type fixtureSetup struct {
	poll certified
	keys map[string]ed25519.PrivateKey
}

func newFixtureSetup(t testing.TB) fixtureSetup {
	t.Helper()
	s := fixtureSetup{keys: map[string]ed25519.PrivateKey{}}
	for _, r := range []string{"ap-1", "eu-1", "us-1"} {
		s.keys[r] = testKey(r)
	}
	s.poll = certify(t, fixturePoll(false), "eu-1", s.keys["eu-1"])
	return s
}

func (s fixtureSetup) lookup(replica string) ed25519.PublicKey {
	if k, ok := s.keys[replica]; ok {
		return k.Public().(ed25519.PublicKey)
	}
	return nil
}

// receipt is record i's receipt, signed by its replica.
func (s fixtureSetup) receipt(i int) Receipt {
	return s.poll.receiptOf(i, s.keys[s.poll.records[i].Replica])
}

// A genuine proof verifies, and the verdict says what the proof and the
// tree head say: the vote, the counted one for a superseded vote, the
// tree's size and root, the certifier.
func TestVerifyVerdict(t *testing.T) {
	s := newFixtureSetup(t)
	p := s.poll.headed(s.poll.proof(t, aliceFirst, Superseded))
	c := s.poll.proof(t, aliceLast, Counted)
	p.Counted = &c
	if !reflect.DeepEqual(p, s.poll.served(t, aliceFirst)) {
		t.Fatalf("alice's first vote is served as %+v", s.poll.served(t, aliceFirst))
	}
	v, err := Verify(s.receipt(aliceFirst), p, s.lookup)
	if err != nil {
		t.Fatal(err)
	}
	if v.Disposition != Superseded || v.Vote.Option != "red" || v.Counted == nil || v.Counted.Option != "blue" ||
		v.Size != 7 || v.Root != s.poll.head.Root || v.By != "eu-1" {
		t.Fatalf("verdict %+v (counted %+v)", v, v.Counted)
	}
	// A duplicate without the standing record (another voter's retry key): it stands alone.
	v, err = Verify(s.receipt(bobRetry), s.poll.headed(s.poll.proof(t, bobRetry, Duplicate)), s.lookup)
	if err != nil || v.Disposition != Duplicate || v.Counted != nil {
		t.Fatalf("a duplicate alone: %+v, %v", v, err)
	}
}

// Every way a proof can be wrong fails, and the error is the sentinel of
// the step that failed.
func TestVerifyNamesTheStep(t *testing.T) {
	s := newFixtureSetup(t)
	mallory := testKey("mallory")
	honest := func(i int, d string) (Receipt, Proof) { return s.receipt(i), s.poll.headed(s.poll.proof(t, i, d)) }
	withCounted := func(i int, d string, counted int, cd string) (Receipt, Proof) {
		r, p := honest(i, d)
		c := s.poll.proof(t, counted, cd)
		p.Counted = &c
		return r, p
	}
	resign := func(p *Proof, change func(*TreeHead)) {
		h := *p.TreeHead
		change(&h)
		h.Sign(s.keys["eu-1"])
		p.TreeHead = &h
	}
	cases := []struct {
		name   string
		change func(r *Receipt, p *Proof)
		base   func() (Receipt, Proof)
		want   error
	}{
		{"receipt malformed", func(r *Receipt, p *Proof) { r.Leaf = "abc" }, nil, ErrMalformed},
		{"receipt by an unknown replica", func(r *Receipt, p *Proof) { r.VoteID = "zz-9/2"; r.Sign(mallory) }, nil, ErrSignature},
		{"receipt signed by another key", func(r *Receipt, p *Proof) { r.Sign(mallory) }, nil, ErrSignature},
		{"receipt's leaf changed", func(r *Receipt, p *Proof) { r.Leaf = p.Path[0] }, nil, ErrSignature},
		{"no tree head", func(r *Receipt, p *Proof) { p.TreeHead = nil }, nil, ErrCertificate},
		{"tree head malformed", func(r *Receipt, p *Proof) { h := *p.TreeHead; h.Root = "x"; p.TreeHead = &h }, nil, ErrCertificate},
		{"tree head of another poll", func(r *Receipt, p *Proof) { resign(p, func(h *TreeHead) { h.Poll = "another-poll" }) }, nil, ErrCertificate},
		{"tree head's size changed", func(r *Receipt, p *Proof) { h := *p.TreeHead; h.Size++; p.TreeHead = &h }, nil, ErrCertificate},
		{"tree head signed by a known replica not named", func(r *Receipt, p *Proof) {
			h := *p.TreeHead
			h.Sign(s.keys["ap-1"])
			p.TreeHead = &h
		}, nil, ErrCertificate},
		{"proof of another leaf", func(r *Receipt, p *Proof) { p.Leaf = strings.Repeat("0", 64) }, nil, ErrRecord},
		{"record flipped", func(r *Receipt, p *Proof) { p.Record = bytes.Clone(p.Record); p.Record[3] ^= 1 }, nil, ErrRecord},
		{"record not a record, hashing to the leaf", func(r *Receipt, p *Proof) {
			p.Record = []byte("not a record")
			*r = s.forgedLeaf(r, hashHex(p.Record))
			p.Leaf = r.Leaf
		}, nil, ErrRecord},
		{"record of another poll", func(r *Receipt, p *Proof) {
			rec := s.poll.records[bob]
			rec.Poll = "another-poll"
			p.Record = rec.AppendBinary(nil)
			*r = s.forgedLeaf(r, hashHex(p.Record))
			p.Leaf = r.Leaf
		}, nil, ErrRecord},
		{"record is another vote of the receipt's replica", func(r *Receipt, p *Proof) {
			q := s.poll.proof(t, carol, Filtered)
			q.TreeHead = p.TreeHead
			*p = q
			*r = s.forgedLeaf(r, q.Leaf)
		}, nil, ErrRecord},
		{"vote misreported", func(r *Receipt, p *Proof) { p.Vote.Voter = "v-mallory" }, nil, ErrRecord},
		{"path too long", func(r *Receipt, p *Proof) { p.Path = append(p.Path, p.Path[0]) }, nil, ErrPath},
		{"path over 64 hashes", func(r *Receipt, p *Proof) { p.Path = slicesRepeat(p.Path[0], 65) }, nil, ErrPath},
		{"path hash upper case", func(r *Receipt, p *Proof) {
			p.Path = append([]string(nil), p.Path...)
			p.Path[1] = strings.ToUpper(p.Path[1])
		}, nil, ErrPath},
		{"path hash short", func(r *Receipt, p *Proof) { p.Path = append([]string{"abcd"}, p.Path[1:]...) }, nil, ErrPath},
		{"index outside the tree", func(r *Receipt, p *Proof) { p.Index = 99 }, nil, ErrPath},
		{"index of a neighbour", func(r *Receipt, p *Proof) { p.Index = 0 }, nil, ErrRoot},
		{"path hash flipped", func(r *Receipt, p *Proof) {
			p.Path = append([]string(nil), p.Path...)
			p.Path[2] = flipHex(p.Path[2])
		}, nil, ErrRoot},
		{"root re-signed", func(r *Receipt, p *Proof) { resign(p, func(h *TreeHead) { h.Root = flipHex(h.Root) }) }, nil, ErrRoot},
		// A path fits trees of several sizes (bob's, leaf 1, is the same in
		// trees of 5 to 8 leaves): the size is the certifier's word. The
		// last leaf's is not.
		{"size re-signed, the last leaf", func(r *Receipt, p *Proof) { resign(p, func(h *TreeHead) { h.Size = 8 }) },
			func() (Receipt, Proof) { return honest(erin, Counted) }, ErrPath},
		{"unknown disposition", func(r *Receipt, p *Proof) { p.Disposition = "maybe" }, nil, ErrRecord},
		{"counted pointing at another", func(r *Receipt, p *Proof) { c := s.poll.proof(t, erin, Counted); p.Counted = &c }, nil, ErrRecord},
		{"superseded alone", nil, func() (Receipt, Proof) { return honest(aliceFirst, Superseded) }, ErrRecord},
		// The root commits to each record's disposition: one said otherwise
		// than the certifier's rules made it leads to another root, the
		// counted one's as the record's own (TestVerifyNestingRules
		// checks the rules between two records' true dispositions).
		{"counted said late", func(r *Receipt, p *Proof) { p.Disposition = Late }, nil, ErrRoot},
		{"late said counted", nil, func() (Receipt, Proof) { return honest(dave, Counted) }, ErrRoot},
		{"filtered said counted", nil, func() (Receipt, Proof) { return honest(carol, Counted) }, ErrRoot},
		{"superseded said counted", nil, func() (Receipt, Proof) { return honest(aliceFirst, Counted) }, ErrRoot},
		{"duplicate said counted", nil, func() (Receipt, Proof) { return honest(bobRetry, Counted) }, ErrRoot},
		{"superseded said duplicate", nil, func() (Receipt, Proof) { return withCounted(aliceFirst, Duplicate, aliceLast, Counted) }, ErrRoot},
		{"superseded by the counted one said late", nil, func() (Receipt, Proof) { return withCounted(aliceFirst, Superseded, aliceLast, Late) }, ErrRoot},
		{"superseded by another voter's", nil, func() (Receipt, Proof) { return withCounted(aliceFirst, Superseded, erin, Counted) }, ErrRecord},
		{"superseded pointing at itself", nil, func() (Receipt, Proof) { return withCounted(aliceFirst, Superseded, aliceFirst, Counted) }, ErrRecord},
		{"duplicate pointing at itself", nil, func() (Receipt, Proof) { return withCounted(bobRetry, Duplicate, bobRetry, Counted) }, ErrRecord},
		{"counted's index the record's own", func(r *Receipt, p *Proof) { c := *p.Counted; c.Index = p.Index; p.Counted = &c }, func() (Receipt, Proof) {
			return withCounted(aliceFirst, Superseded, aliceLast, Counted)
		}, ErrRecord},
		{"counted's proof nests further", func(r *Receipt, p *Proof) { c := *p.Counted; c.TreeHead = p.TreeHead; p.Counted = &c }, func() (Receipt, Proof) {
			return withCounted(aliceFirst, Superseded, aliceLast, Counted)
		}, ErrRecord},
		{"counted's record flipped", func(r *Receipt, p *Proof) {
			c := *p.Counted
			c.Record = bytes.Clone(c.Record)
			c.Record[5] ^= 1
			p.Counted = &c
		}, func() (Receipt, Proof) { return withCounted(aliceFirst, Superseded, aliceLast, Counted) }, ErrRecord},
		{"counted's path flipped", func(r *Receipt, p *Proof) {
			c := *p.Counted
			c.Path = append([]string(nil), c.Path...)
			c.Path[0] = flipHex(c.Path[0])
			p.Counted = &c
		}, func() (Receipt, Proof) { return withCounted(aliceFirst, Superseded, aliceLast, Counted) }, ErrRoot},
		{"counted's path cut", func(r *Receipt, p *Proof) {
			c := *p.Counted
			c.Path = c.Path[1:]
			p.Counted = &c
		}, func() (Receipt, Proof) { return withCounted(aliceFirst, Superseded, aliceLast, Counted) }, ErrPath},
	}
	steps := []error{ErrMalformed, ErrSignature, ErrCertificate, ErrRecord, ErrPath, ErrRoot}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, p := honest(bob, Counted)
			if c.base != nil {
				r, p = c.base()
			}
			if c.change != nil {
				c.change(&r, &p)
			}
			_, err := Verify(r, p, s.lookup)
			if !errors.Is(err, c.want) {
				t.Fatalf("%v, want %v", err, c.want)
			}
			for _, other := range steps {
				if other != c.want && errors.Is(err, other) {
					t.Fatalf("%v is both %v and %v", err, c.want, other)
				}
			}
		})
	}
}

// forgedLeaf is r with another leaf, signed again by its replica: a
// genuine receipt of a record the proof must then match.
func (s fixtureSetup) forgedLeaf(r *Receipt, leaf string) Receipt {
	out := *r
	out.Leaf = leaf
	out.Sign(s.keys[out.Replica()])
	return out
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// DecodeProof reads what the server writes back to the same proof, and
// refuses malformed, truncated, oversized and trailing input and unknown
// fields at any depth, with ErrMalformed.
func TestDecodeProof(t *testing.T) {
	s := newFixtureSetup(t)
	p := s.poll.headed(s.poll.proof(t, aliceFirst, Superseded))
	c := s.poll.proof(t, aliceLast, Counted)
	p.Counted = &c
	good, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeProof(good)
	if err != nil || !reflect.DeepEqual(back, p) {
		t.Fatalf("round trip: %v\n%+v\n%+v", err, back, p)
	}
	if _, err := DecodeProof(append(append([]byte(" \n"), good...), "\n\t "...)); err != nil {
		t.Fatalf("white space around: %v", err)
	}
	edit := func(change func(m map[string]any)) []byte {
		var m map[string]any
		json.Unmarshal(good, &m)
		change(m)
		b, _ := json.Marshal(m)
		return b
	}
	for what, b := range map[string][]byte{
		"empty":                 nil,
		"space":                 []byte("  "),
		"not json":              []byte("proof"),
		"truncated":             good[:len(good)/2],
		"cut at the end":        good[:len(good)-1],
		"an array":              append(append([]byte("["), good...), ']'),
		"a string":              []byte(`"proof"`),
		"after":                 append(bytes.Clone(good), '}'),
		"two":                   append(bytes.Clone(good), good...),
		"trailing garbage":      append(bytes.Clone(good), " x"...),
		"unknown field":         edit(func(m map[string]any) { m["option"] = "red" }),
		"unknown in vote":       edit(func(m map[string]any) { m["vote"].(map[string]any)["ip"] = "1.2.3.4" }),
		"unknown in tree head":  edit(func(m map[string]any) { m["tree_head"].(map[string]any)["extra"] = 1 }),
		"unknown in counted":    edit(func(m map[string]any) { m["counted"].(map[string]any)["extra"] = true }),
		"index negative":        edit(func(m map[string]any) { m["index"] = -1 }),
		"index fractional":      edit(func(m map[string]any) { m["index"] = 1.5 }),
		"index a string":        edit(func(m map[string]any) { m["index"] = "1" }),
		"path not a list":       edit(func(m map[string]any) { m["path"] = "abc" }),
		"path of numbers":       edit(func(m map[string]any) { m["path"] = []int{1, 2} }),
		"record not base64":     edit(func(m map[string]any) { m["record"] = "!!!" }),
		"tree head sig not b64": edit(func(m map[string]any) { m["tree_head"].(map[string]any)["sig"] = "@@" }),
		"oversized":             edit(func(m map[string]any) { m["disposition"] = strings.Repeat("x", MaxProofJSON) }),
	} {
		if _, err := DecodeProof(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", what, err)
		}
	}
	// Exactly at the bound decodes; one byte over does not.
	at := append(bytes.Clone(good), bytes.Repeat([]byte(" "), MaxProofJSON-len(good))...)
	if _, err := DecodeProof(at); err != nil {
		t.Fatalf("%d bytes: %v", len(at), err)
	}
	if _, err := DecodeProof(append(at, ' ')); !errors.Is(err, ErrMalformed) {
		t.Fatalf("%d bytes: %v", len(at)+1, err)
	}
}

// Whatever the bytes, DecodeProof answers without panicking, only with
// ErrMalformed, and what it accepts encodes and decodes to itself.
func FuzzDecodeProof(f *testing.F) {
	s := newFixtureSetup(f)
	p := s.poll.headed(s.poll.proof(f, aliceFirst, Superseded))
	c := s.poll.proof(f, aliceLast, Counted)
	p.Counted = &c
	good, _ := json.Marshal(p)
	f.Add(good)
	f.Add([]byte(`{"leaf":"","index":0,"path":null,"record":null,"vote":{},"disposition":""}`))
	f.Add([]byte(`{"counted":{"counted":{"counted":{}}}}`))
	f.Add([]byte(`{"path":[],"record":"","tree_head":{"sig":""}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeProof(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("%v is not ErrMalformed", err)
			}
			return
		}
		again, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if len(again) > MaxProofJSON {
			t.Skip("re-encoded with escapes, over the bound")
		}
		back, err := DecodeProof(again)
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Fatalf("%q decoded to %+v, and again to %+v (%v)", b, got, back, err)
		}
	})
}

// AppendJSON writes what json.Marshal writes, byte for byte: for random
// valid receipts, for one without a signature, and for fields that need
// escaping (which it leaves to encoding/json).
func TestReceiptAppendJSON(t *testing.T) {
	seed := rand.Uint64()
	rnd := rand.New(rand.NewPCG(seed, 62))
	idChars := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
	id := func() string {
		b := make([]byte, 1+rnd.IntN(ledger.MaxIDLen))
		for i := range b {
			b[i] = idChars[rnd.IntN(len(idChars))]
		}
		return string(b)
	}
	check := func(r Receipt) {
		t.Helper()
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		prefix := []byte("prefix,")
		got := r.AppendJSON(bytes.Clone(prefix))
		if !bytes.Equal(got[len(prefix):], want) || !bytes.Equal(got[:len(prefix)], prefix) {
			t.Fatalf("seed %d: AppendJSON\n%s\njson.Marshal\n%s", seed, got, want)
		}
	}
	for range 500 {
		leaf := make([]byte, 32)
		sig := make([]byte, ed25519.SignatureSize)
		for i := range leaf {
			leaf[i] = byte(rnd.Uint32())
		}
		for i := range sig {
			sig[i] = byte(rnd.Uint32())
		}
		r := Receipt{Poll: id(), VoteID: id() + "/" + strconv.FormatUint(1+rnd.Uint64N(1<<62), 10),
			Stamp: fmt.Sprintf("%d.%d", 1+rnd.Int64N(1<<50), rnd.Uint32()), Leaf: hex.EncodeToString(leaf), Sig: sig}
		if err := r.Check(); err != nil {
			t.Fatalf("seed %d: a random receipt is not valid: %v", seed, err)
		}
		check(r)
	}
	check(Receipt{Poll: "p", VoteID: "r/1", Stamp: "1.0", Leaf: strings.Repeat("a", 64)})
	check(Receipt{})
	for _, s := range []string{`a"b`, `a\b`, "a<b>&c", "é", "a\nb", "\x00", "\u2028", "\xff", "a\x7f"} {
		check(Receipt{Poll: s, VoteID: "r/1", Stamp: "1.0", Leaf: s, Sig: []byte{1, 2, 3}})
		check(Receipt{Poll: "p", VoteID: s, Stamp: s, Leaf: "l"})
	}
}

// randomPoll is n records of a poll over a few replicas' chains, in the
// certificate's order, with random voters, options and flags, and some
// retries (an earlier record's voter and idempotency key again): every
// disposition occurs.
func randomPoll(rnd *rand.Rand, n int) []ledger.Record {
	replicas := []string{"ap-1", "eu-1", "sa-1", "us-1"}[:1+rnd.IntN(4)]
	byReplica := make([][]ledger.Record, len(replicas))
	var made []ledger.Record
	for i := range n {
		rec := ledger.Record{Poll: "random-poll", Wall: 1796040000000 + int64(i)*7 + rnd.Int64N(5), Logical: uint32(rnd.IntN(3)),
			Voter: fmt.Sprintf("voter-%d", rnd.IntN(n/2+1)), Option: []string{"red", "green", "blue"}[rnd.IntN(3)],
			Idem: fmt.Sprintf("idem-%d", rnd.Uint64()), Trust: rnd.Float64(), Counted: rnd.IntN(8) != 0, Late: rnd.IntN(16) == 0,
			IPHash: fmt.Sprintf("%016x", rnd.Uint64())}
		if rnd.IntN(2) == 0 {
			rec.Signals = &ledger.Signals{SincePrevMs: rnd.Int64N(1e6), IPVotesPerMin: rnd.Uint64N(100), IPVoters: rnd.Uint64N(50), TokenAgeMs: -1, SocketAgeMs: rnd.Int64N(1e5)}
		}
		if len(made) > 0 && rnd.IntN(8) == 0 {
			first := made[rnd.IntN(len(made))]
			rec.Voter, rec.Option, rec.Idem = first.Voter, first.Option, first.Idem
		}
		made = append(made, rec)
		k := rnd.IntN(len(replicas))
		byReplica[k] = append(byReplica[k], rec)
	}
	var out []ledger.Record
	for k, recs := range byReplica {
		out = append(out, chain(replicas[k], recs...)...)
	}
	return out
}

// For random trees of random records, every record's proof, as the
// certifier serves it (its disposition under the rules), verifies
// through Verify with that disposition, and one bit flipped in the record, in one hash of its
// path or in the root (re-signed by the certifier) fails at the record,
// the root and the root. A root changed under its old signature fails at
// the certificate.
func TestEveryProofVerifies(t *testing.T) {
	seed := rand.Uint64()
	rnd := rand.New(rand.NewPCG(seed, 9162))
	sizes := []int{2000}
	for n := 1; n <= 40; n++ {
		sizes = append(sizes, n)
	}
	sizes = append(sizes, 41+rnd.IntN(1960))
	switch {
	case testing.Short():
		sizes = sizes[1:20]
	case race.Enabled: // every check's two signatures cost ten times as much: the big trees are package merkle's
		sizes = append(sizes[1:17], 17+rnd.IntN(100))
	}
	keys := map[string]ed25519.PrivateKey{}
	for _, r := range []string{"ap-1", "eu-1", "sa-1", "us-1"} {
		keys[r] = testKey(r)
	}
	lookup := func(r string) ed25519.PublicKey {
		if k, ok := keys[r]; ok {
			return k.Public().(ed25519.PublicKey)
		}
		return nil
	}
	for _, n := range sizes {
		poll := certify(t, randomPoll(rnd, n), "eu-1", keys["eu-1"])
		flipped := poll.head
		flipped.Root = flipBit(rnd, flipped.Root)
		unsigned := flipped
		flipped.Sign(keys["eu-1"])
		for i := range poll.records {
			r := poll.receiptOf(i, keys[poll.records[i].Replica])
			p := poll.served(t, i)
			if v, err := Verify(r, p, lookup); err != nil || v.Disposition != poll.word(i) {
				t.Fatalf("seed %d, tree of %d, leaf %d (%s): %+v, %v", seed, n, i, poll.word(i), v, err)
			}
			q := p
			q.Record = bytes.Clone(p.Record)
			q.Record[rnd.IntN(len(q.Record))] ^= 1 << rnd.IntN(8)
			mustFail(t, seed, n, i, "a record bit", r, q, lookup, ErrRecord)
			if len(p.Path) > 0 {
				q = p
				q.Path = append([]string(nil), p.Path...)
				k := rnd.IntN(len(q.Path))
				q.Path[k] = flipBit(rnd, q.Path[k])
				mustFail(t, seed, n, i, "a path bit", r, q, lookup, ErrRoot)
			}
			q = p
			q.TreeHead = &flipped
			mustFail(t, seed, n, i, "a root bit, re-signed", r, q, lookup, ErrRoot)
			if i == 0 {
				q.TreeHead = &unsigned
				mustFail(t, seed, n, i, "a root bit", r, q, lookup, ErrCertificate)
			}
		}
	}
}

func mustFail(t *testing.T, seed uint64, n, i int, what string, r Receipt, p Proof, keys Keys, want error) {
	t.Helper()
	if _, err := Verify(r, p, keys); !errors.Is(err, want) {
		t.Fatalf("seed %d, tree of %d, leaf %d, %s flipped: %v, want %v", seed, n, i, what, err, want)
	}
}

// flipBit flips one random bit of a hex-encoded hash.
func flipBit(rnd *rand.Rand, s string) string {
	b, _ := hex.DecodeString(s)
	b[rnd.IntN(len(b))] ^= 1 << rnd.IntN(8)
	return hex.EncodeToString(b)
}

// A disposition's code in a leaf is ledger.Disposition's value, and
// distinct words have distinct codes; no other word has one.
func TestDispositionCodes(t *testing.T) {
	seen := map[byte]string{}
	for d, w := range dispositionWords {
		c := DispositionCode(w)
		if c != byte(d) || c == 0 {
			t.Errorf("%s: code %d, ledger's %d", w, c, d)
		}
		if other, ok := seen[c]; ok {
			t.Errorf("%s and %s share code %d", w, other, c)
		}
		seen[c] = w
	}
	if len(seen) != 5 {
		t.Fatalf("%d dispositions", len(seen))
	}
	for _, w := range []string{"", "Counted", "shadowed", "maybe", "counted "} {
		if c := DispositionCode(w); c != 0 {
			t.Errorf("%q: code %d", w, c)
		}
	}
}

// For every record of random trees, its honest proof with the
// disposition changed to any other word never verifies: it fails at the
// root (the leaf commits to the disposition), or at the record where the
// nesting rules catch it first. The forgery made most plausible (no
// counted proof for a word that takes none; the voter's counted one for
// "superseded") fails at the root. The same holds of the disposition of
// a nested counted proof.
func TestDispositionForgeries(t *testing.T) {
	seed := rand.Uint64()
	rnd := rand.New(rand.NewPCG(seed, 33))
	sizes := []int{1, 2, 3, 5, 8, 13, 21, 34, 100 + rnd.IntN(200)}
	if testing.Short() || race.Enabled {
		sizes = append(sizes[:7], 22+rnd.IntN(40))
	}
	keys := map[string]ed25519.PrivateKey{}
	for _, r := range []string{"ap-1", "eu-1", "sa-1", "us-1"} {
		keys[r] = testKey(r)
	}
	lookup := func(r string) ed25519.PublicKey {
		if k, ok := keys[r]; ok {
			return k.Public().(ed25519.PublicKey)
		}
		return nil
	}
	words := []string{Counted, Superseded, Late, Filtered, Duplicate}
	tried := map[string]int{} // true word → forgeries of it
	for _, n := range sizes {
		poll := certify(t, randomPoll(rnd, n), "eu-1", keys["eu-1"])
		counted := map[string]int{} // voter → its counted record
		for i := range poll.records {
			if poll.disp[i] == ledger.DispCounted {
				counted[poll.records[i].Voter] = i
			}
		}
		for i := range poll.records {
			r := poll.receiptOf(i, keys[poll.records[i].Replica])
			p := poll.served(t, i)
			if _, err := Verify(r, p, lookup); err != nil {
				t.Fatalf("seed %d, tree of %d, leaf %d (%s): %v", seed, n, i, poll.word(i), err)
			}
			for _, w := range words {
				if w == poll.word(i) {
					continue
				}
				tried[poll.word(i)]++
				what := fmt.Sprintf("seed %d, tree of %d, leaf %d: %s said %s", seed, n, i, poll.word(i), w)
				q := p
				q.Disposition = w
				mustNotVerify(t, what+", its counted proof kept", r, q, lookup, false)
				q.Counted = nil
				if c, ok := counted[poll.records[i].Voter]; w == Superseded && ok && c != i {
					cp := poll.proof(t, c, Counted)
					q.Counted = &cp
				}
				mustNotVerify(t, what+", made plausible", r, q, lookup, w != Superseded || q.Counted != nil)
			}
			if p.Counted != nil {
				for _, w := range words {
					if w == p.Counted.Disposition {
						continue
					}
					q, c := p, *p.Counted
					c.Disposition = w
					q.Counted = &c
					mustNotVerify(t, fmt.Sprintf("seed %d, tree of %d, leaf %d (%s): its counted one said %s", seed, n, i, poll.word(i), w), r, q, lookup, false)
				}
			}
		}
	}
	for _, w := range words {
		if tried[w] == 0 && !testing.Short() {
			t.Errorf("seed %d: no %s record in the trees", seed, w)
		}
	}
}

// mustNotVerify checks that Verify refuses p at the root, or, unless
// atRoot, at the record.
func mustNotVerify(t *testing.T, what string, r Receipt, p Proof, keys Keys, atRoot bool) {
	t.Helper()
	_, err := Verify(r, p, keys)
	switch {
	case err == nil:
		t.Fatalf("%s: verifies", what)
	case errors.Is(err, ErrRoot):
	case !atRoot && errors.Is(err, ErrRecord):
	default:
		t.Fatalf("%s: %v, want %v", what, err, map[bool]string{true: "the root", false: "the root or the record"}[atRoot])
	}
}

// The rules between a proof and its nested counted one, each record's
// leaf true (so the root holds for both): in a poll where one voter has
// a record of every disposition, a superseded record said replaced by
// the voter's late or filtered one, or a duplicate said to stand for
// another key's record or for a duplicate, fails at the record; the
// certifier's proofs verify.
func TestVerifyNestingRules(t *testing.T) {
	const wall = 1796040000000
	vote := func(ms int64, option, idem string) ledger.Record {
		return ledger.Record{Poll: "nesting-poll", Wall: wall + ms, Voter: "v-x", Option: option, Idem: idem, Trust: 0.9, Counted: true}
	}
	late := vote(2000, "green", "k-x-2")
	late.Late = true
	filtered := vote(5000, "red", "k-x-4")
	filtered.Counted = false
	recs := append(chain("ap-1", vote(1000, "red", "k-x-1"), late, vote(3000, "blue", "k-x-3")),
		chain("eu-1", vote(4000, "blue", "k-x-3"), filtered, vote(6000, "blue", "k-x-3"))...)
	const (
		superseded  = iota // ap-1/1
		lateOne            // ap-1/2
		countedOne         // ap-1/3
		retry              // eu-1/1: a duplicate of ap-1/3
		filteredOne        // eu-1/2
		retryAgain         // eu-1/3: another
	)
	keys := map[string]ed25519.PrivateKey{"ap-1": testKey("ap-1"), "eu-1": testKey("eu-1")}
	lookup := func(r string) ed25519.PublicKey { return keys[r].Public().(ed25519.PublicKey) }
	poll := certify(t, recs, "eu-1", keys["eu-1"])
	for i, w := range []string{Superseded, Late, Counted, Duplicate, Filtered, Duplicate} {
		if poll.word(i) != w {
			t.Fatalf("record %d: the rules make it %s, this test wants %s", i, poll.word(i), w)
		}
	}
	receipt := func(i int) Receipt { return poll.receiptOf(i, keys[poll.records[i].Replica]) }
	for _, i := range []int{superseded, retry, retryAgain} {
		if v, err := Verify(receipt(i), poll.served(t, i), lookup); err != nil || v.Counted == nil || v.Counted.VoteID != poll.records[countedOne].ID().String() {
			t.Fatalf("record %d served: %+v, %v", i, v, err)
		}
	}
	for _, c := range []struct {
		name       string
		of, nested int
	}{
		{"superseded, replaced by a late one", superseded, lateOne},
		{"superseded, replaced by a filtered one", superseded, filteredOne},
		{"superseded, replaced by a duplicate", superseded, retryAgain},
		{"a duplicate, standing for another key's", retry, superseded},
		{"a duplicate, standing for a late one of another key", retry, lateOne},
		{"a duplicate, standing for a duplicate", retry, retryAgain},
	} {
		p := poll.served(t, c.of)
		q := poll.proof(t, c.nested, poll.word(c.nested))
		p.Counted = &q
		if _, err := Verify(receipt(c.of), p, lookup); !errors.Is(err, ErrRecord) || errors.Is(err, ErrRoot) {
			t.Errorf("%s: %v, want ErrRecord", c.name, err)
		}
	}
}
