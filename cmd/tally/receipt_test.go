package main

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
	"tally/receipt"
)

// receiptFixture is receipt/testdata/fixture.json (receipt/fixture_test.go
// describes it), its cases' receipts and proofs kept as they are written.
type receiptFixture struct {
	Keys  api.ClusterKeys `json:"keys"`
	Cases []struct {
		Name    string          `json:"name"`
		Receipt json.RawMessage `json:"receipt"`
		Proof   json.RawMessage `json:"proof"`
		Want    string          `json:"want"`
	} `json:"cases"`
}

func loadReceiptFixture(t *testing.T) receiptFixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "receipt", "testdata", "fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f receiptFixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) == 0 || len(f.Keys.Keys) == 0 {
		t.Fatal("an empty fixture")
	}
	return f
}

// writeFile writes v (bytes as they are, anything else as JSON) into a
// file of dir and returns its name.
func writeFile(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, ok := v.([]byte)
	if raw, isRaw := v.(json.RawMessage); isRaw {
		b, ok = raw, true
	}
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// verdictPhrase is what the verdict of each disposition says.
var verdictPhrase = map[string]string{
	receipt.Counted:    "is in the certified result.",
	receipt.Superseded: "was replaced by your later vote for blue (eu-1/1), which is counted.",
	receipt.Late:       "after the poll closed: it is not counted.",
	receipt.Filtered:   "below the floor",
	receipt.Duplicate:  "was a retry: your vote ap-1/2 for blue, taken first, stands in its place (counted)",
}

// checkVerdict checks one run of tally receipt verify against a case's
// want: the verdict and exit 0, or the failing step named and exit 1.
func checkVerdict(t *testing.T, name, want, out, stderr string, code int) {
	t.Helper()
	step, isErr := strings.CutPrefix(want, "error:")
	switch {
	case !isErr && (code != 0 || !strings.Contains(out, verdictPhrase[want]) || strings.Contains(out, "✗")):
		t.Errorf("%s: exit %d, want 0 and %q\n%s%s", name, code, verdictPhrase[want], out, stderr)
	case isErr && (code != 1 || !strings.Contains(out, step+" ✗") || !strings.Contains(out, "failed at the "+step+" step")):
		t.Errorf("%s: exit %d, want 1 and the %s step failed\n%s%s", name, code, step, out, stderr)
	}
}

// Every case of the fixture, from files, gives its verdict or names its
// failing step; each step that held has its line.
func TestReceiptVerifyFixture(t *testing.T) {
	f := loadReceiptFixture(t)
	dir := t.TempDir()
	keys := writeFile(t, dir, "keys.json", f.Keys)
	for _, c := range f.Cases {
		r := writeFile(t, dir, c.Name+"-receipt.json", c.Receipt)
		p := writeFile(t, dir, c.Name+"-proof.json", c.Proof)
		out, stderr, code := runCLI(t, "receipt", "verify", "--proof", p, "--keys", keys, r)
		checkVerdict(t, c.Name, c.Want, out, stderr, code)
		if c.Want == receipt.Counted && !strings.Contains(out, "signature ✓") {
			t.Errorf("%s: no signature line\n%s", c.Name, out)
		}
	}
	out, _, _ := runCLI(t, "receipt", "verify", "--proof", filepath.Join(dir, "counted-proof.json"), "--keys", keys, filepath.Join(dir, "counted-receipt.json"))
	for _, line := range []string{"signature ✓ ap-1's key", "certificate ✓ tree of 7 records signed by eu-1", "record ✓ ap-1/2: voter v-bob, option blue",
		"path ✓ leaf 1, 3 hashes", "root ✓ ", "Your vote for blue is in the certified result."} {
		if !strings.Contains(out, line) {
			t.Errorf("no line %q in\n%s", line, out)
		}
	}
	// A disposition edited in the proof: the record and its path are
	// well formed, and the leaf (the record's hash and its disposition)
	// leads to another root.
	out, _, _ = runCLI(t, "receipt", "verify", "--proof", filepath.Join(dir, "disposition-forged-late-as-counted-proof.json"), "--keys", keys,
		filepath.Join(dir, "disposition-forged-late-as-counted-receipt.json"))
	for _, line := range []string{"record ✓ eu-1/3: voter v-dave", "path ✓ leaf 5", "root ✗ ", "failed at the root step"} {
		if !strings.Contains(out, line) {
			t.Errorf("the late vote said counted: no line %q in\n%s", line, out)
		}
	}
}

// A saved vote answer (or one result of it) is read for its first
// receipt.
func TestReceiptVerifyReadsAVoteAnswer(t *testing.T) {
	f := loadReceiptFixture(t)
	c := f.Cases[0]
	dir := t.TempDir()
	keys := writeFile(t, dir, "keys.json", f.Keys)
	p := writeFile(t, dir, "proof.json", c.Proof)
	var rc receipt.Receipt
	json.Unmarshal(c.Receipt, &rc)
	answer := api.VoteResponse{Results: []api.VoteResult{{Idem: "k", Status: "rejected"}, {Idem: "k-bob-1", Status: "accepted", VoteID: rc.VoteID, Stamp: rc.Stamp, Receipt: &rc}}, ServerTime: 1}
	for name, v := range map[string]any{"answer.json": answer, "result.json": answer.Results[1]} {
		r := writeFile(t, dir, name, v)
		out, stderr, code := runCLI(t, "receipt", "verify", "--proof", p, "--keys", keys, r)
		checkVerdict(t, name, c.Want, out, stderr, code)
	}
	r := writeFile(t, dir, "none.json", api.VoteResponse{Results: []api.VoteResult{{Idem: "k", Status: "rejected"}}})
	if _, stderr, code := runCLI(t, "receipt", "verify", "--proof", p, "--keys", keys, r); code != 1 || !strings.Contains(stderr, "holds no receipt") {
		t.Fatalf("an answer without a receipt: %d %s", code, stderr)
	}
}

// Fetched from a node: the proof at /v1/polls/POLL/proofs/LEAF and the
// keys at /v1/cluster/keys; a 404 or 409 is said in plain words.
func TestReceiptVerifyFetches(t *testing.T) {
	f := loadReceiptFixture(t)
	proofs := map[string]json.RawMessage{}
	for _, c := range f.Cases[:7] { // the honest ones
		var p receipt.Proof
		json.Unmarshal(c.Proof, &p)
		proofs[p.Leaf] = c.Proof
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/cluster/keys", func(w http.ResponseWriter, r *http.Request) { json.NewEncoder(w).Encode(f.Keys) })
	mux.HandleFunc("GET /v1/polls/{poll}/proofs/{leaf}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("poll") {
		case "fixture-poll":
		case "open-poll":
			api.WriteError(w, r, api.Errorf(http.StatusConflict, api.CodePollNotClosed, "poll open-poll is not certified"))
			return
		default:
			api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll"))
			return
		}
		p, ok := proofs[r.PathValue("leaf")]
		if !ok {
			api.WriteError(w, r, api.Errorf(http.StatusNotFound, "leaf_not_found", "no such leaf"))
			return
		}
		w.Write(p)
	})
	var honest receipt.Proof
	json.Unmarshal(f.Cases[0].Proof, &honest)
	var served atomic.Pointer[receipt.TreeHead] // the certificate the node serves holds it; a test below serves another
	served.Store(honest.TreeHead)
	mux.HandleFunc("GET /v1/polls/{poll}/result", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("poll") != "fixture-poll" {
			api.WriteError(w, r, api.Errorf(http.StatusNotFound, api.CodePollNotFound, "no poll"))
			return
		}
		tree := *served.Load()
		detail, _ := json.Marshal(api.ResultDetail{Coordinator: "eu-1", Tree: &tree})
		cert := ledger.Certificate{Poll: "fixture-poll", Status: ledger.Reconciled, TS: hlc.Timestamp{Wall: 5, Replica: "eu-1"}, By: "eu-1",
			Total: 3, Digest: tree.Digest, Detail: detail}
		cert.Sig = ed25519.Sign(fixtureKey("eu-1"), cert.SigningBytes())
		json.NewEncoder(w).Encode(api.ResultView{Poll: "fixture-poll", Status: ledger.Reconciled, Digest: tree.Digest, Certificate: &cert})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	for _, c := range f.Cases[:7] {
		r := writeFile(t, dir, c.Name+".json", c.Receipt)
		out, stderr, code := runCLI(t, "receipt", "verify", "--url", srv.URL, r)
		checkVerdict(t, c.Name, c.Want, out, stderr, code)
	}
	r0 := writeFile(t, dir, "old-spelling.json", f.Cases[0].Receipt)
	if out, stderr, code := runCLI(t, "receipt", "verify", "--node", srv.URL, r0); code != 0 {
		t.Fatalf("--node: %d\n%s%s", code, out, stderr)
	}
	t.Setenv("TALLY_URL", srv.URL)
	r := writeFile(t, dir, "counted.json", f.Cases[0].Receipt)
	if out, stderr, code := runCLI(t, "receipt", "verify", r); code != 0 {
		t.Fatalf("$TALLY_URL: %d\n%s%s", code, out, stderr)
	}
	t.Setenv("TALLY_URL", "")

	// A proof whose tree head is not the one of the certificate the node
	// serves (another tree, signed by a key the node lists; or a
	// certificate since withdrawn) fails at the certificate step.
	other := *honest.TreeHead
	other.Root = strings.Repeat("0", 64)
	served.Store(&other)
	out, stderr, code := runCLI(t, "receipt", "verify", "--url", srv.URL, r)
	if code != 1 || !strings.Contains(out, "certificate ✗") {
		t.Errorf("a tree head the served certificate does not hold: %d\n%s%s", code, out, stderr)
	}
	served.Store(honest.TreeHead)

	// A receipt of a leaf the certified result does not hold, of a poll
	// not certified, of a poll the node does not know: genuine receipts,
	// signed by a replica the keys name.
	key := fixtureKey("ap-1")
	for _, c := range []struct{ poll, leaf, want string }{
		{"fixture-poll", strings.Repeat("ab", 32), "holds no record with leaf " + strings.Repeat("ab", 32)},
		{"open-poll", strings.Repeat("cd", 32), "has no certified result with a tree yet"},
		{"gone-poll", strings.Repeat("ef", 32), `knows no poll "gone-poll"`},
	} {
		rc := receipt.Receipt{Poll: c.poll, VoteID: "ap-1/9", Stamp: "1796040002000.0", Leaf: c.leaf}
		rc.Sign(key)
		r := writeFile(t, dir, c.poll+".json", rc)
		out, stderr, code := runCLI(t, "receipt", "verify", "--url", srv.URL, r)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: %d, want 1 and %q\n%s%s", c.poll, code, c.want, out, stderr)
		}
	}
}

// fixtureKey is a fixture replica's private key: the seed
// receipt/fixture_test.go derives it from.
func fixtureKey(replica string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("tally receipt fixture " + replica))
	return ed25519.NewKeyFromSeed(seed[:])
}

// --certificate: the certificate holding the proof's tree head, signed
// by the certifier, passes; another tree, an unsigned or forged
// certificate, or one without a tree fails at the certificate step.
func TestReceiptVerifyCertificate(t *testing.T) {
	f := loadReceiptFixture(t)
	c := f.Cases[0]
	var p receipt.Proof
	json.Unmarshal(c.Proof, &p)
	eu := fixtureKey("eu-1")
	for _, k := range f.Keys.Keys {
		if k.Replica == "eu-1" && !eu.Public().(ed25519.PublicKey).Equal(ed25519.PublicKey(k.PublicKey)) {
			t.Fatal("the fixture's eu-1 key is not from the seed this test derives it from")
		}
	}
	result := func(tree *receipt.TreeHead, key ed25519.PrivateKey, change func(*ledger.Certificate)) api.ResultView {
		detail, _ := json.Marshal(api.ResultDetail{Coordinator: "eu-1", Tree: tree})
		cert := ledger.Certificate{Poll: "fixture-poll", Status: ledger.Reconciled, TS: hlc.Timestamp{Wall: 5, Replica: "eu-1"}, By: "eu-1",
			Total: 3, Digest: p.TreeHead.Digest, Detail: detail}
		if change != nil {
			change(&cert)
		}
		cert.Sig = ed25519.Sign(key, cert.SigningBytes())
		return api.ResultView{Poll: "fixture-poll", Status: "reconciled", Digest: cert.Digest, Certificate: &cert, CertifierKey: key.Public().(ed25519.PublicKey)}
	}
	other := *p.TreeHead
	other.Root = strings.Repeat("0", 64)
	dir := t.TempDir()
	keys := writeFile(t, dir, "keys.json", f.Keys)
	proof := writeFile(t, dir, "proof.json", c.Proof)
	rfile := writeFile(t, dir, "receipt.json", c.Receipt)
	for _, k := range []struct {
		name string
		v    any
		want string
	}{
		{"the certificate's", result(p.TreeHead, eu, nil), ""},
		{"another tree", result(&other, eu, nil), "the certificate's tree is 7 records with root 0000"},
		{"no tree", result(nil, eu, nil), "holds no tree head"},
		{"signed by another key", result(p.TreeHead, fixtureKey("ap-1"), nil), "not signed by eu-1's key"},
		{"another digest", result(p.TreeHead, eu, func(c *ledger.Certificate) { c.Digest = strings.Repeat("1", 64) }), "names digest"},
	} {
		cf := writeFile(t, dir, "cert.json", k.v)
		out, stderr, code := runCLI(t, "receipt", "verify", "--proof", proof, "--keys", keys, "--certificate", cf, rfile)
		if k.want == "" {
			if code != 0 || !strings.Contains(out, "held by the certificate signed by eu-1") {
				t.Errorf("%s: %d\n%s%s", k.name, code, out, stderr)
			}
			continue
		}
		if code != 1 || !strings.Contains(out, "certificate ✗") || !strings.Contains(out, k.want) {
			t.Errorf("%s: %d, want the certificate step failed with %q\n%s%s", k.name, code, k.want, out, stderr)
		}
	}
}

// Bad input: a clear error, exit 1 for files that cannot be read, 2 for
// a usage error.
func TestReceiptVerifyBadInput(t *testing.T) {
	t.Setenv("TALLY_URL", "")
	f := loadReceiptFixture(t)
	c := f.Cases[0]
	dir := t.TempDir()
	keys := writeFile(t, dir, "keys.json", f.Keys)
	proof := writeFile(t, dir, "proof.json", c.Proof)
	good := writeFile(t, dir, "receipt.json", c.Receipt)
	bad := func(name, content string) string { return writeFile(t, dir, name, []byte(content)) }
	for _, k := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no file", []string{"--proof", proof, "--keys", keys}, 2, "give one receipt FILE"},
		{"two files", []string{"--proof", proof, "--keys", keys, good, good}, 2, "give one receipt FILE"},
		{"no proof nor node", []string{"--keys", keys, good}, 2, "give --proof FILE"},
		{"no keys nor node", []string{"--proof", proof, good}, 2, "give --keys FILE"},
		{"a bad node URL", []string{"--url", "ftp://x", good}, 2, "--url"},
		{"an unknown flag", []string{"--proofs", proof, good}, 2, "--proofs"},
		{"a missing file", []string{"--proof", proof, "--keys", keys, filepath.Join(dir, "nothing.json")}, 1, "no such file"},
		{"not JSON", []string{"--proof", proof, "--keys", keys, bad("r1.json", "receipt")}, 1, "not a receipt"},
		{"truncated", []string{"--proof", proof, "--keys", keys, bad("r2.json", string(c.Receipt[:40]))}, 1, "not a receipt"},
		{"a receipt with an unknown field", []string{"--proof", proof, "--keys", keys, bad("r3.json", `{"poll":"p","option":"red"}`)}, 1, "malformed"},
		{"oversized", []string{"--proof", proof, "--keys", keys, bad("r4.json", strings.Repeat(" ", maxReceiptFile+1))}, 1, "over 65536 bytes"},
		{"a proof not JSON", []string{"--proof", bad("p1.json", "{"), "--keys", keys, good}, 1, "the proof: receipt: malformed"},
		{"a proof oversized", []string{"--proof", bad("p2.json", strings.Repeat(" ", receipt.MaxProofJSON+1)), "--keys", keys, good}, 1, "over 65536 bytes"},
		{"a proof with trailing data", []string{"--proof", bad("p3.json", string(c.Proof)+"{}"), "--keys", keys, good}, 1, "data after the proof"},
		{"keys not JSON", []string{"--proof", proof, "--keys", bad("k1.json", "[1]"), good}, 1, "the keys"},
		{"a short key", []string{"--proof", proof, "--keys", bad("k2.json", `{"keys":[{"replica":"ap-1","public_key":"AAAA"}]}`), good}, 1, "3 bytes"},
		{"a certificate not JSON", []string{"--proof", proof, "--keys", keys, "--certificate", bad("c1.json", "x"), good}, 1, "--certificate"},
		{"a result without a certificate", []string{"--proof", proof, "--keys", keys, "--certificate", bad("c2.json", `{"status":"pending"}`), good}, 1, "no signed certificate"},
	} {
		out, stderr, code := runCLI(t, append([]string{"receipt", "verify"}, k.args...)...)
		if code != k.code || !strings.Contains(stderr, k.want) {
			t.Errorf("%s: exit %d, want %d and %q\n%s%s", k.name, code, k.code, k.want, out, stderr)
		}
	}
	if out, _, code := runCLI(t, "receipt", "--help"); code != 0 || !strings.Contains(out, "verify FILE") {
		t.Errorf("receipt --help: %d %s", code, out)
	}
	if out, _, code := runCLI(t, "receipt", "verify", "--help"); code != 0 || !strings.Contains(out, "--certificate") {
		t.Errorf("receipt verify --help: %d %s", code, out)
	}
}

// A superseded vote's verdict says which vote replaced it: the later one,
// or, for a quiz question (the first answer counts), the earlier one.
func TestReceiptVerdictOrder(t *testing.T) {
	if !stampBefore("1796040001000.0", "1796040005000.0") || !stampBefore("5.1", "5.2") || stampBefore("5.2", "5.2") || stampBefore("6.0", "5.9") {
		t.Fatal("stampBefore")
	}
	v := receipt.Verdict{Disposition: receipt.Superseded, Vote: receipt.Vote{Option: "red", Stamp: "9.0"}, Counted: &receipt.Vote{Option: "blue", VoteID: "eu-1/1", Stamp: "5.0"}}
	if got := verdictWords(v, receipt.Proof{}); !strings.Contains(got, "your earlier answer (a quiz question's first answer counts) for blue (eu-1/1)") {
		t.Fatal(got)
	}
}
