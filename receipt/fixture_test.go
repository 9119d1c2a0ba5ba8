package receipt

// TestFixture builds a small certified poll, deterministically, and keeps
// testdata/fixture.json equal to it: other clients (clients/js) test
// their own check of a receipt against the file. After a change to the
// poll below, rewrite it with
//
//	go test ./receipt -run TestFixture -update
//
// The file is one JSON object:
//
//	{
//	  "about": "…",
//	  "keys": {"keys": [{"replica": "ap-1", "public_key": "BASE64"}, …]},
//	  "cases": [
//	    {
//	      "name": "counted",   // unique, a word or two
//	      "about": "…",        // what the case is, in plain words
//	      "receipt": {…},      // as a vote answer's "receipt" field holds it
//	      "proof": {…},        // as GET /v1/polls/{poll}/proofs/{leaf} answers
//	      "want": "counted"    // what the check must conclude
//	    }, …
//	  ]
//	}
//
// "keys" is the body of GET /v1/cluster/keys (keys in standard base64);
// "receipt" and "proof" are Receipt and Proof in JSON: byte fields (sig,
// record) in standard base64, hashes (leaf, path, root, digest) in
// lowercase hex. "want" is a disposition ("counted", "superseded",
// "late", "duplicate", "filtered") when the check holds, else "error:"
// and the step that failed, as Verify names it: "error:signature" (the
// receipt's), "error:certificate" (the tree head's signature or fields),
// "error:record", "error:path" or "error:root".
//
// The tree is RFC 9162's (§2.1) over SHA-256, its leaves in the
// certificate's order. A leaf's data is 33 bytes: the record's hash (the
// proof's "leaf": SHA-256 of its "record" bytes), then one byte, the
// proof's "disposition" as a code: counted 1, superseded 2, late 3,
// filtered 4, duplicate 5 (receipt.DispositionCode). The leaf's node is
// SHA-256(0x00 ‖ those 33 bytes), an inner node SHA-256(0x01 ‖ left ‖
// right): the root commits to every record and to what became of it, so
// a proof whose disposition was edited leads to another root
// ("error:root"). A nested "counted" proof (a superseded record's, or a
// duplicate's) is another record's, the same voter's, at another leaf
// and index (the record itself there is "error:record"); its leaf is
// made of its own record and disposition, the same way.
//
// The poll, "fixture-poll", has three replicas, their chains in the
// certificate's order (ap-1, eu-1, us-1), seven records in all, each
// with what the ledger's rules make of it (TestFixture checks it):
//
//	ap-1/1  v-alice  red    superseded by eu-1/1 (she changed her mind)
//	ap-1/2  v-bob    blue   counted
//	ap-1/3  v-carol  green  filtered (not counted at ingest, trust 0.2)
//	eu-1/1  v-alice  blue   counted
//	eu-1/2  v-bob    blue   duplicate of ap-1/2 (a retry: same idem, later)
//	eu-1/3  v-dave   red    late
//	us-1/1  v-erin   green  counted
//
// eu-1 certified it. "mallory" signs the forgeries; its key is not in
// "keys".

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tally/ledger"
	"tally/merkle"
)

var update = flag.Bool("update", false, "rewrite testdata/fixture.json from the poll TestFixture builds")

const fixtureFile = "testdata/fixture.json"

// fixture is the file's content.
type fixture struct {
	About string        `json:"about"`
	Keys  fixtureKeys   `json:"keys"`
	Cases []fixtureCase `json:"cases"`
}

// fixtureKeys is api.ClusterKeys (which this package cannot import: api
// imports it).
type fixtureKeys struct {
	Keys []fixtureKey `json:"keys"`
}

// fixtureKey is api.ReplicaKey.
type fixtureKey struct {
	Replica   string `json:"replica"`
	PublicKey []byte `json:"public_key"`
}

type fixtureCase struct {
	Name    string  `json:"name"`
	About   string  `json:"about"`
	Receipt Receipt `json:"receipt"`
	Proof   Proof   `json:"proof"`
	Want    string  `json:"want"`
}

// lookup is the keys as Verify takes them.
func (k fixtureKeys) lookup(replica string) ed25519.PublicKey {
	for _, e := range k.Keys {
		if e.Replica == replica {
			return e.PublicKey
		}
	}
	return nil
}

// testKey is a replica's key from a fixed seed.
func testKey(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("tally receipt fixture " + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

// chain links records into one replica's hash chain: seq from 1, each
// Prev the hash of the record before.
func chain(replica string, recs ...ledger.Record) []ledger.Record {
	var prev ledger.Hash
	for i := range recs {
		recs[i].Replica, recs[i].Seq, recs[i].Prev = replica, uint64(i+1), prev
		prev = recs[i].Hash()
	}
	return recs
}

// certified is a poll as its certifier saw it: the records in the
// certificate's order, what the ledger's rules made of each, their tree
// and the signed tree head.
type certified struct {
	records []ledger.Record
	disp    []ledger.Disposition // by record: ledger.DisposeChains'
	other   []int                // by record: the record its disposition points at (ledger.Disposed.Other), or -1
	tree    *merkle.Tree
	head    TreeHead
}

// certify builds the tree over records, in their order, each leaf the
// record's hash and its disposition under the ledger's rules (the zero
// config: ledger.DisposeChains), and the tree head, signed by key as
// replica by. The order may be another than the certificate's (a
// forgery's): each record keeps its own disposition.
func certify(t testing.TB, records []ledger.Record, by string, key ed25519.PrivateKey) certified {
	t.Helper()
	recs := ptrs(records)
	d, err := ledger.DisposeChains(ledger.ReconcileConfig{Poll: records[0].Poll}, recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Records) != len(records) {
		t.Fatalf("the rules dispose of %d records of %d", len(d.Records), len(records))
	}
	at := make(map[*ledger.Record]int, len(recs)) // a record → its place in records
	for i, r := range recs {
		at[r] = i
	}
	c := certified{records: records, disp: make([]ledger.Disposition, len(records)), other: make([]int, len(records))}
	for j, r := range d.Records {
		i, ok := at[r]
		if !ok {
			t.Fatalf("the rules dispose of a record %s/%d not given", r.Replica, r.Seq)
		}
		c.disp[i], c.other[i] = d.Of[j], -1
		if o := d.Other[j]; o >= 0 {
			c.other[i] = at[d.Records[o]]
		}
	}
	leaves := make([]merkle.Leaf, len(records))
	for i := range records {
		leaves[i] = merkle.LeafOf(merkle.Hash(records[i].Hash()), byte(c.disp[i]))
	}
	c.tree = merkle.New(leaves)
	root, digest := c.tree.Root(), sha256.Sum256([]byte("fixture"))
	c.head = TreeHead{Poll: records[0].Poll, Size: c.tree.Size(), Root: hex.EncodeToString(root[:]), Digest: hex.EncodeToString(digest[:]), By: by}
	c.head.Sign(key)
	return c
}

// dispositionWords is each ledger disposition as a proof says it.
var dispositionWords = map[ledger.Disposition]string{
	ledger.DispCounted:    Counted,
	ledger.DispSuperseded: Superseded,
	ledger.DispLate:       Late,
	ledger.DispShadowed:   Filtered,
	ledger.DispDuplicate:  Duplicate,
}

// word is record i's disposition under the rules, as a proof says it.
func (c certified) word(i int) string { return dispositionWords[c.disp[i]] }

// served is record i's proof as the certifier serves it: its disposition
// under the rules, the tree head, and the record its disposition points
// at when that is the same voter's (certify/proofs.go).
func (c certified) served(t testing.TB, i int) Proof {
	t.Helper()
	p := c.headed(c.proof(t, i, c.word(i)))
	if o := c.other[i]; o >= 0 && c.records[o].Voter == c.records[i].Voter {
		q := c.proof(t, o, c.word(o))
		p.Counted = &q
	}
	return p
}

// proof is record i's proof with its disposition, without the tree head
// or a counted record.
func (c certified) proof(t testing.TB, i int, disposition string) Proof {
	t.Helper()
	path, err := c.tree.Proof(uint64(i))
	if err != nil {
		t.Fatal(err)
	}
	rec := &c.records[i]
	leaf := rec.Hash()
	p := Proof{Leaf: leaf.String(), Index: uint64(i), Record: rec.AppendBinary(nil), Vote: VoteOf(rec), Disposition: disposition}
	for _, h := range path {
		p.Path = append(p.Path, hex.EncodeToString(h[:]))
	}
	return p
}

// headed is p with the tree head, as the server answers it.
func (c certified) headed(p Proof) Proof {
	h := c.head
	p.TreeHead = &h
	return p
}

// receiptOf is the receipt of record i, signed with key.
func (c certified) receiptOf(i int, key ed25519.PrivateKey) Receipt {
	rec := &c.records[i]
	leaf := rec.Hash()
	r := Receipt{Poll: rec.Poll, VoteID: rec.ID().String(), Stamp: stamp(rec.Wall, rec.Logical), Leaf: leaf.String()}
	r.Sign(key)
	return r
}

// fixturePoll is the poll of the file's comment, in the certificate's
// order; forked replaces us-1's record by another (a ledger that is not
// the certified one).
func fixturePoll(forked bool) []ledger.Record {
	const wall = 1796040000000
	vote := func(ms int64, voter, option, idem string) ledger.Record {
		return ledger.Record{Poll: "fixture-poll", Wall: wall + ms, Voter: voter, Option: option, Idem: idem,
			Trust: 0.9, Counted: true, IPHash: "5f1c0e2a9b7d4c38"}
	}
	carol := vote(3000, "v-carol", "green", "k-carol-1")
	carol.Counted, carol.Trust = false, 0.2
	carol.Signals = &ledger.Signals{SincePrevMs: 0, IPVotesPerMin: 240, IPVoters: 90, TokenAgeMs: -1, SocketAgeMs: -1, Datacenter: true}
	dave := vote(9000, "v-dave", "red", "k-dave-1")
	dave.Late = true
	erin := vote(4000, "v-erin", "green", "k-erin-1")
	if forked {
		erin.Option = "red"
	}
	var all []ledger.Record
	all = append(all, chain("ap-1", vote(1000, "v-alice", "red", "k-alice-1"), vote(2000, "v-bob", "blue", "k-bob-1"), carol)...)
	all = append(all, chain("eu-1", vote(5000, "v-alice", "blue", "k-alice-2"), vote(6000, "v-bob", "blue", "k-bob-1"), dave)...)
	return append(all, chain("us-1", erin)...)
}

// Places of the fixture's records in the certified tree.
const (
	aliceFirst = iota // ap-1/1
	bob               // ap-1/2
	carol             // ap-1/3
	aliceLast         // eu-1/1
	bobRetry          // eu-1/2
	dave              // eu-1/3
	erin              // us-1/1
)

// buildFixture builds the file's content. It is long because it is one
// list: the poll's honest cases, then each forgery, each a few lines.
func buildFixture(t testing.TB) fixture {
	t.Helper()
	keys := map[string]ed25519.PrivateKey{}
	f := fixture{About: "receipts and proofs of a small certified poll, honest and tampered: receipt/fixture_test.go describes the shape"}
	for _, r := range []string{"ap-1", "eu-1", "us-1"} {
		keys[r] = testKey(r)
		f.Keys.Keys = append(f.Keys.Keys, fixtureKey{r, keys[r].Public().(ed25519.PublicKey)})
	}
	mallory := testKey("mallory")
	poll := certify(t, fixturePoll(false), "eu-1", keys["eu-1"])
	signedBy := func(i int) Receipt { return poll.receiptOf(i, keys[poll.records[i].Replica]) }
	add := func(name, about string, r Receipt, p Proof, want string) {
		f.Cases = append(f.Cases, fixtureCase{Name: name, About: about, Receipt: r, Proof: p, Want: want})
	}
	// honest is record i's proof as the certifier serves it (its
	// disposition under the rules); forged says any disposition.
	honest := func(i int) Proof { return poll.served(t, i) }
	forged := func(i int, disposition string) Proof { return poll.headed(poll.proof(t, i, disposition)) }

	add("counted", "bob's vote, counted", signedBy(bob), honest(bob), Counted)
	add("counted-changed-mind", "alice's second vote, the one that counts", signedBy(aliceLast), honest(aliceLast), Counted)
	add("counted-last-leaf", "erin's vote, the tree's last leaf (its own chain)", signedBy(erin), honest(erin), Counted)
	add("superseded", "alice's first vote, replaced by her later one (proof.counted)", signedBy(aliceFirst), honest(aliceFirst), Superseded)
	add("duplicate", "bob's retry at another replica; his first record stands (proof.counted)", signedBy(bobRetry), honest(bobRetry), Duplicate)
	add("late", "dave's vote, after the close", signedBy(dave), honest(dave), Late)
	add("filtered", "carol's vote, below the trust floor", signedBy(carol), honest(carol), Filtered)

	p := honest(bob)
	p.Record = bytes.Clone(p.Record)
	p.Record[len(p.Record)/2] ^= 1
	add("record-byte-flipped", "one byte of the record flipped: it no longer hashes to the leaf", signedBy(bob), p, "error:record")

	p = honest(bob)
	p.Vote.Option = "red"
	add("vote-misreported", "the proof's vote says red, its record blue", signedBy(bob), p, "error:record")

	add("proof-of-another-leaf", "bob's receipt with erin's proof", signedBy(bob), honest(erin), "error:record")

	p = honest(aliceFirst)
	c := poll.proof(t, erin, Counted)
	p.Counted = &c
	add("superseded-by-another-voter", "alice's first vote said replaced by erin's", signedBy(aliceFirst), p, "error:record")

	add("disposition-forged-late-as-counted", "dave's late vote, its proof's disposition edited to counted: the leaf's disposition byte changes, and the path leads to another root",
		signedBy(dave), forged(dave, Counted), "error:root")
	add("disposition-forged-superseded-as-counted", "alice's first vote, its proof's disposition edited to counted and the counted one removed: the path leads to another root",
		signedBy(aliceFirst), forged(aliceFirst, Counted), "error:root")

	p = honest(aliceFirst)
	c = poll.proof(t, aliceFirst, Counted)
	p.Counted = &c
	add("superseded-pointing-at-itself", "alice's first vote said replaced by itself, said counted", signedBy(aliceFirst), p, "error:record")

	p = honest(bob)
	p.Path = append([]string(nil), p.Path...)
	p.Path[0] = flipHex(p.Path[0])
	add("path-hash-flipped", "one bit of a path hash flipped: the path leads to another root", signedBy(bob), p, "error:root")

	p = honest(bob)
	p.Path = p.Path[:len(p.Path)-1]
	add("path-too-short", "the path lacks its last hash", signedBy(bob), p, "error:path")

	p = honest(bob)
	p.Index = poll.head.Size
	add("index-outside-tree", "leaf 7 of a tree of 7 (leaves from 0)", signedBy(bob), p, "error:path")

	forked := certify(t, fixturePoll(true), "eu-1", keys["eu-1"])
	add("path-from-another-tree", "bob's path in a tree where erin's record differs, with the certified tree head", signedBy(bob), poll.headed(forked.proof(t, bob, forked.word(bob))), "error:root")

	swapped := fixturePoll(false)
	swapped = append(append(append([]ledger.Record(nil), swapped[3:6]...), swapped[:3]...), swapped[6:]...)
	reordered := certify(t, swapped, "eu-1", keys["eu-1"])
	add("chains-reordered", "bob's path in a tree with eu-1's chain before ap-1's, with the certified tree head", signedBy(bob), poll.headed(reordered.proof(t, bob+3, reordered.word(bob+3))), "error:root")

	// Each case its own copy of the tree head: they are written at the end.
	withHead := func(change func(h *TreeHead)) Proof {
		p := honest(bob)
		h := *p.TreeHead
		change(&h)
		p.TreeHead = &h
		return p
	}
	add("root-forged", "the tree head names eu-1 and another root, signed by a key that is not eu-1's", signedBy(bob),
		withHead(func(h *TreeHead) { h.Root = forked.head.Root; h.Sign(mallory) }), "error:certificate")
	add("root-changed", "the tree head's root changed, its signature kept", signedBy(bob),
		withHead(func(h *TreeHead) { h.Root = forked.head.Root }), "error:certificate")
	add("certifier-unknown", "the tree head signed by a replica that is not in the keys", signedBy(bob),
		withHead(func(h *TreeHead) { h.By = "mallory"; h.Sign(mallory) }), "error:certificate")

	add("receipt-wrong-key", "bob's receipt signed by a key that is not ap-1's", poll.receiptOf(bob, mallory), honest(bob), "error:signature")

	r := signedBy(bob)
	r.Stamp = stamp(poll.records[bob].Wall, 1)
	add("receipt-stamp-changed", "bob's receipt with another stamp, its signature kept", r, honest(bob), "error:signature")
	return f
}

// flipHex flips the lowest bit of a hex string's first digit.
func flipHex(s string) string {
	b, _ := hex.DecodeString(s)
	b[0] ^= 0x10
	return hex.EncodeToString(b)
}

// want is what Verify's answer reads as in the fixture: the disposition,
// or "error:" and the step.
func want(v Verdict, err error) string {
	if err == nil {
		return v.Disposition
	}
	for _, s := range []struct {
		err  error
		step string
	}{{ErrSignature, "signature"}, {ErrCertificate, "certificate"}, {ErrRecord, "record"}, {ErrPath, "path"}, {ErrRoot, "root"}, {ErrMalformed, "malformed"}} {
		if errors.Is(err, s.err) {
			return "error:" + s.step
		}
	}
	return "error:" + err.Error()
}

// The fixture's poll is what the ledger's rules make of its records, each
// case's "want" is what Verify concludes, and testdata/fixture.json is
// the fixture, every case of it read by the strict decoders (with
// -update, it is rewritten).
func TestFixture(t *testing.T) {
	res, err := ledger.ReconcileChains(ledger.ReconcileConfig{Poll: "fixture-poll"}, ptrs(fixturePoll(false)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 7 || res.Total != 3 || res.Superseded != 1 || res.Duplicates != 1 || res.Late != 1 || res.Shadowed != 1 {
		t.Fatalf("the ledger's rules make another poll of the records: %+v", res)
	}
	// The tree's leaves carry what the rules make of each record: the
	// comment's, and the reconciled result's.
	poll := certify(t, fixturePoll(false), "eu-1", testKey("eu-1"))
	for i, w := range []string{Superseded, Counted, Filtered, Counted, Duplicate, Late, Counted} {
		r := &poll.records[i]
		if poll.word(i) != w || res.Disposition(r.Replica, r.Seq) != poll.disp[i] {
			t.Fatalf("%s: the rules make it %s (the result %d), the comment says %s", r.ID(), poll.word(i), res.Disposition(r.Replica, r.Seq), w)
		}
	}
	// The root is RFC 9162's over the leaves the comment describes,
	// computed here from the definition, as a client does.
	var leaves [][32]byte
	for i := range poll.records {
		h := poll.records[i].Hash()
		leaves = append(leaves, sha256.Sum256(append(append([]byte{0}, h[:]...), DispositionCode(poll.word(i)))))
	}
	if root := rfcRoot(leaves); hex.EncodeToString(root[:]) != poll.head.Root {
		t.Fatalf("the tree head's root %s, RFC 9162's over hash ‖ disposition %x", poll.head.Root, root)
	}
	f := buildFixture(t)
	names := map[string]bool{}
	heads := map[*TreeHead]string{} // a head shared by two cases would be written as the last one changed it
	for _, c := range f.Cases {
		if names[c.Name] {
			t.Fatalf("two cases named %s", c.Name)
		}
		names[c.Name] = true
		if other, ok := heads[c.Proof.TreeHead]; ok && c.Proof.TreeHead != nil {
			t.Fatalf("cases %s and %s share one tree head", other, c.Name)
		}
		heads[c.Proof.TreeHead] = c.Name
		if got := want(Verify(c.Receipt, c.Proof, f.Keys.lookup)); got != c.Want {
			t.Errorf("%s: Verify says %s, the case wants %s", c.Name, got, c.Want)
		}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *update {
		if err := os.MkdirAll(filepath.Dir(fixtureFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fixtureFile, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file, err := os.ReadFile(fixtureFile)
	if err != nil {
		t.Fatalf("%v (go test ./receipt -run TestFixture -update writes it)", err)
	}
	if !bytes.Equal(file, b) {
		t.Fatalf("%s is not the fixture this test builds: rewrite it with go test ./receipt -run TestFixture -update", fixtureFile)
	}
	checkFixtureFile(t, file)
}

// checkFixtureFile reads the file as a client would, through the strict
// decoders, and checks every case's want.
func checkFixtureFile(t *testing.T, file []byte) {
	var raw struct {
		Keys  fixtureKeys `json:"keys"`
		Cases []struct {
			Name    string          `json:"name"`
			Receipt json.RawMessage `json:"receipt"`
			Proof   json.RawMessage `json:"proof"`
			Want    string          `json:"want"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(file, &raw); err != nil {
		t.Fatal(err)
	}
	for _, c := range raw.Cases {
		r, err := Decode(c.Receipt)
		if err != nil {
			t.Errorf("%s: the receipt: %v", c.Name, err)
			continue
		}
		p, err := DecodeProof(c.Proof)
		if err != nil {
			t.Errorf("%s: the proof: %v", c.Name, err)
			continue
		}
		if got := want(Verify(r, p, raw.Keys.lookup)); got != c.Want || strings.TrimSpace(c.Name) == "" {
			t.Errorf("%s: from the file, Verify says %s, the case wants %s", c.Name, got, c.Want)
		}
	}
}

// rfcRoot is RFC 9162's MTH (§2.1.1) over the leaves' nodes: the
// subtree of the largest power of two below n, then the rest.
func rfcRoot(nodes [][32]byte) [32]byte {
	if len(nodes) == 1 {
		return nodes[0]
	}
	k := 1
	for k*2 < len(nodes) {
		k *= 2
	}
	l, r := rfcRoot(nodes[:k]), rfcRoot(nodes[k:])
	return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
}

// ptrs is records as pointers.
func ptrs(records []ledger.Record) []*ledger.Record {
	out := make([]*ledger.Record, len(records))
	for i := range records {
		out[i] = &records[i]
	}
	return out
}
