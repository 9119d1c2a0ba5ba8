package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
	"tally/state"
)

// TestAuditAgainstARunningNode walks a poll from creation to a certified
// result with the CLI: export over the API, check the result reproduces,
// and see a tampered file fail.
func TestAuditAgainstARunningNode(t *testing.T) {
	base := startTestNode(t, t.TempDir())
	deadline := time.Now().Add(20 * time.Second)
	for post(t, base+"/v1/polls", `{"id":"q","question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":1,"grace_s":0.2}`) != 201 {
		if time.Now().After(deadline) {
			t.Fatal("node not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, o := range []string{"a", "b", "a"} {
		if c := post(t, base+"/v1/polls/q/votes", `{"option":"`+o+`","voter":"v`+string(rune('0'+i))+`","idem":"i`+string(rune('0'+i))+`"}`); c != 200 {
			t.Fatalf("vote: %d", c)
		}
	}
	for {
		out, _, code := runCLI(t, "poll", "result", "--node", base, "--poll", "q")
		if code == 0 {
			if !strings.Contains(out, "reconciled") || !strings.Contains(out, "total") {
				t.Fatalf("result: %s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not certified: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	dir := t.TempDir()
	if _, stderr, code := runCLI(t, "ledger", "export", "--node", base, "--poll", "q", "--token", "tok", "-o", dir); code != 0 {
		t.Fatalf("export: %s", stderr)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.ndjson"))
	if len(files) != 1 {
		t.Fatalf("export wrote %v", files)
	}
	// The README's offline recipe reproduces the certificate with no flag:
	// the exports say how the poll closed.
	resJSON, _, _ := runCLI(t, "poll", "result", "--node", base, "--poll", "q", "--json")
	var cert api.ResultView
	if err := json.Unmarshal([]byte(resJSON), &cert); err != nil || cert.Digest == "" {
		t.Fatalf("result --json: %v %s", err, resJSON)
	}
	merged, stderr, code := runCLI(t, append([]string{"ledger", "merge"}, files...)...)
	if code != 0 || !strings.Contains(merged, "digest   "+cert.Digest) || stderr != "" {
		t.Fatalf("ledger merge does not reproduce the certificate's digest %s: %d\n%s%s", cert.Digest, code, merged, stderr)
	}
	out, stderr, code := runCLI(t, append([]string{"poll", "result", "--node", base, "--poll", "q"}, files...)...)
	if code != 0 || !strings.Contains(out, "reproduced: 1 file gives the same digest") ||
		!strings.Contains(out, "the key that signed its exports") {
		t.Fatalf("reproduce: %d %s %s", code, out, stderr)
	}
	// A tampered export does not reproduce it.
	b, _ := os.ReadFile(files[0])
	lines := strings.SplitAfter(strings.TrimRight(string(b), "\n"), "\n")
	if strings.HasPrefix(lines[len(lines)-1], `{"signed_head":`) {
		lines = lines[:len(lines)-1] // the node's signature goes too: a cut export cannot keep it
	}
	os.WriteFile(files[0], []byte(strings.Join(lines[:len(lines)-1], "")), 0o644)
	if out, _, code := runCLI(t, append([]string{"poll", "result", "--node", base, "--poll", "q"}, files...)...); code != 1 || !strings.Contains(out, "NOT REPRODUCED") {
		t.Fatalf("a truncated export reproduced the result: %d %s", code, out)
	}
	// Certify on a certified poll answers with the result.
	if out, _, code := runCLI(t, "poll", "certify", "--node", base, "--poll", "q", "--token", "tok"); code != 0 || !strings.Contains(out, "reconciled") {
		t.Fatalf("certify: %d %s", code, out)
	}
}

// The auditor's signature check refuses an unsigned or tampered
// certificate, and a certifier key other than the one on its exports.
func TestCheckSignature(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	other, _, _ := ed25519.GenerateKey(nil)
	cert := state.Certificate{Poll: "p", Status: state.Reconciled, TS: hlc.Timestamp{Wall: 5, Replica: "eu-1"}, By: "eu-1", Total: 3, Digest: "d"}
	cert.Sig = ed25519.Sign(priv, cert.SigningBytes())
	id := (&ledger.SignedHead{Pub: pub}).KeyID()
	otherID := (&ledger.SignedHead{Pub: other}).KeyID()
	tampered := cert
	tampered.Total = 999999
	unsigned := cert
	unsigned.Sig = nil
	for name, c := range map[string]struct {
		cert  state.Certificate
		key   ed25519.PublicKey
		heads map[string]string
		want  int
	}{
		"good, matching export key": {cert, pub, map[string]string{"eu-1": id}, 0},
		"good, no export head":      {cert, pub, nil, 0},
		"exports signed otherwise":  {cert, pub, map[string]string{"eu-1": otherID}, 1},
		"tampered":                  {tampered, pub, nil, 1},
		"unsigned":                  {unsigned, pub, nil, 1},
		"another key":               {cert, other, nil, 1},
	} {
		var out bytes.Buffer
		if got := checkSignature(&out, api.ResultView{Certificate: &c.cert, CertifierKey: c.key}, c.heads); got != c.want {
			t.Errorf("%s: %d (%s)", name, got, out.String())
		}
	}
}

// TestMergeTakesTheCloseFromTheExports: the exports' close lines decide
// the merge's close unless a flag does; exports that disagree, and a merge
// with nothing to go by, are said.
func TestMergeTakesTheCloseFromTheExports(t *testing.T) {
	c := func(ms int64, first bool) *ledger.PollClose {
		return &ledger.PollClose{Poll: "p", ClosesAt: ms, FirstWins: first}
	}
	files := []string{"eu.ndjson", "us.ndjson"}
	for _, tc := range []struct {
		name      string
		closes    []*ledger.PollClose
		set       map[string]bool
		flagMs    int64
		wantMs    int64
		wantFirst bool
		warn, err bool
	}{
		{"both agree", []*ledger.PollClose{c(9, true), c(9, true)}, nil, 0, 9, true, false, false},
		{"one has none", []*ledger.PollClose{nil, c(9, false)}, nil, 0, 9, false, false, false},
		{"the flag wins", []*ledger.PollClose{c(9, false), c(9, false)}, map[string]bool{"closes-at": true}, 5, 5, false, false, false},
		{"they disagree", []*ledger.PollClose{c(9, false), c(8, false)}, nil, 0, 0, false, false, true},
		{"none at all", []*ledger.PollClose{nil, nil}, nil, 0, 0, false, true, false},
		{"none, but the flag", []*ledger.PollClose{nil, nil}, map[string]bool{"closes-at": true}, 7, 7, false, false, false},
		{"rules disagree", []*ledger.PollClose{c(9, false), {Poll: "p", ClosesAt: 9, CloseRule: ledger.CloseByNode}}, nil, 0, 0, false, false, true},
	} {
		ms, first, rule := tc.flagMs, false, ""
		warn, err := mergeClose(files, tc.closes, mergeFlags{&ms, &first, &rule}, tc.set)
		if (err != nil) != tc.err || (warn != "") != tc.warn || !tc.err && (ms != tc.wantMs || first != tc.wantFirst) {
			t.Errorf("%s: closes_at %d first_wins %t, warning %q, err %v", tc.name, ms, first, warn, err)
		}
	}
}

// TestMergeOfAPollNobodyVotedIn: an export holding only its close line
// merges to the digest of that poll, closed then, as the flags give it.
func TestMergeOfAPollNobodyVotedIn(t *testing.T) {
	dir := t.TempDir()
	only := filepath.Join(dir, "close.ndjson")
	os.WriteFile(only, []byte(`{"close":{"poll":"p","closes_at":1800000060000}}`+"\n"), 0o644)
	empty := filepath.Join(dir, "empty.ndjson")
	os.WriteFile(empty, nil, 0o644)
	got, stderr, code := runCLI(t, "ledger", "merge", "--json", only)
	want, _, wcode := runCLI(t, "ledger", "merge", "--json", "--poll", "p", "--closes-at", "1800000060000", empty)
	if code != 0 || wcode != 0 || got != want || stderr != "" || !strings.Contains(got, `"total": 0`) {
		t.Fatalf("close line alone: %d %s %s\nflags: %d %s", code, got, stderr, wcode, want)
	}
}
