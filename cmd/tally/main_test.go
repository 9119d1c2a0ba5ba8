package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tally/ledger"
)

// writeExports ledgers votes at two replicas (with a cross-region retry
// and a changed vote) and exports both; it returns the file names.
func writeExports(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	var files []string
	for i, replica := range []string{"eu-1", "us-1"} {
		l, err := ledger.Open(ledger.Config{Dir: filepath.Join(dir, replica), Replica: replica})
		if err != nil {
			t.Fatal(err)
		}
		for j := range 50 {
			voter := fmt.Sprintf("v%d", j%30)
			option := []string{"red", "blue", "green"}[(i+j)%3]
			idem := fmt.Sprintf("%s-%d", replica, j)
			if j == 7 {
				idem = "shared-retry"
			}
			r := ledger.Record{Poll: "final", Voter: voter, Option: option, Idem: idem, Wall: int64(1000 + 10*j + i), Trust: 1, Counted: true}
			if _, err := l.Append(r); err != nil {
				t.Fatal(err)
			}
		}
		name := filepath.Join(dir, replica+".ndjson")
		f, _ := os.Create(name)
		if _, err := l.Export(f, "final"); err != nil {
			t.Fatal(err)
		}
		f.Close()
		l.Close()
		files = append(files, name)
	}
	return files
}

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestMergeMatchesLibrary(t *testing.T) {
	files := writeExports(t)
	out, stderr, code := runCLI(t, "ledger", "merge", "--json", files[1], files[0])
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got ledger.Result
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	var streams []func(func(ledger.Record, error) bool)
	for _, name := range files {
		f, _ := os.Open(name)
		defer f.Close()
		streams = append(streams, ledger.ReadNDJSON(f))
	}
	want, err := ledger.Reconcile(streams[0], streams[1])
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != want.Digest || got.Total != want.Total || got.Duplicates != 1 {
		t.Fatalf("CLI result %+v, library %+v", got, want)
	}
	human, _, code := runCLI(t, "ledger", "merge", files[0], files[1])
	if code != 0 || !strings.Contains(human, want.Digest) || !strings.Contains(human, "OPTION") {
		t.Fatalf("human output:\n%s", human)
	}
}

func TestVerify(t *testing.T) {
	files := writeExports(t)
	out, stderr, code := runCLI(t, append([]string{"ledger", "verify"}, files...)...)
	if code != 0 || strings.Count(out, "final") != 2 {
		t.Fatalf("exit %d, out:\n%s\nerr: %s", code, out, stderr)
	}
	// Tamper with one vote: verification and merge both fail, naming the line.
	b, _ := os.ReadFile(files[0])
	lines := strings.SplitAfter(string(b), "\n")
	lines[3] = strings.Replace(lines[3], `"counted":true`, `"counted":false`, 1)
	bad := filepath.Join(t.TempDir(), "bad.ndjson")
	os.WriteFile(bad, []byte(strings.Join(lines, "")), 0o600)
	if _, stderr, code := runCLI(t, "ledger", "verify", bad); code != 1 || !strings.Contains(stderr, "line 4") {
		t.Fatalf("tampered verify: exit %d, %s", code, stderr)
	}
	if _, _, code := runCLI(t, "ledger", "merge", bad, files[1]); code != 1 {
		t.Fatalf("tampered merge: exit %d", code)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"nope"}, {"ledger"}, {"ledger", "merge"}, {"ledger", "verify"}, {"ledger", "export"}} {
		if _, _, code := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if _, _, code := runCLI(t, "ledger", "verify", "/does/not/exist"); code != 1 {
		t.Errorf("missing file: exit %d, want 1", code)
	}
}

func TestExportFromDataDir(t *testing.T) {
	dataDir := t.TempDir()
	l, err := ledger.Open(ledger.Config{Dir: ledgerDir(dataDir), Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	for j := range 5 {
		k := fmt.Sprint(j)
		if _, err := l.Append(ledger.Record{Poll: "p", Voter: k, Option: "red", Idem: k, Wall: 10, Trust: 1, Counted: true}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	out := filepath.Join(t.TempDir(), "p.ndjson")
	if _, stderr, code := runCLI(t, "ledger", "export", "--data-dir", dataDir, "--poll", "p", "-o", out); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	res, _, code := runCLI(t, "ledger", "merge", "--json", out)
	if code != 0 || !strings.Contains(res, `"total": 5`) {
		t.Fatalf("merge of export: exit %d\n%s", code, res)
	}
	if _, _, code := runCLI(t, "ledger", "export", "--data-dir", dataDir, "--poll", "nope"); code != 1 {
		t.Fatalf("export of unknown poll: exit %d", code)
	}
}
