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
	// An unknown poll with -o leaves no file.
	none := filepath.Join(t.TempDir(), "none.ndjson")
	if _, stderr, code := runCLI(t, "ledger", "export", "--data-dir", dataDir, "--poll", "nope", "-o", none); code != 1 || !strings.Contains(stderr, "nope") {
		t.Fatalf("export of unknown poll to a file: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(none); !os.IsNotExist(err) {
		t.Fatalf("a failed export left %s behind", none)
	}
	// A data dir that does not exist is an error and is not created.
	typo := filepath.Join(t.TempDir(), "typo")
	if _, stderr, code := runCLI(t, "ledger", "export", "--data-dir", typo, "--poll", "p"); code != 1 || !strings.Contains(stderr, "no ledger") {
		t.Fatalf("export from a missing dir: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(typo); !os.IsNotExist(err) {
		t.Fatalf("export created %s", typo)
	}
}

// An auditor's export of a ledger whose WAL is damaged in the middle fails
// and leaves every file as it was (Pebble used to flush the damaged log
// into a new table, destroying the evidence).
func TestExportRefusesDamagedLedgerAndChangesNothing(t *testing.T) {
	dataDir := t.TempDir()
	l, err := ledger.Open(ledger.Config{Dir: ledgerDir(dataDir), Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	for j := range 200 {
		k := fmt.Sprint(j)
		if _, err := l.Append(ledger.Record{Poll: "p", Voter: k, Option: "red", Idem: k, Wall: 10, Trust: 1, Counted: true}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	logs, _ := filepath.Glob(filepath.Join(ledgerDir(dataDir), "*.log"))
	wal := logs[len(logs)-1]
	data, _ := os.ReadFile(wal)
	used := len(strings.TrimRight(string(data), "\x00"))
	data[used/2] ^= 0x01
	os.WriteFile(wal, data, 0o600)
	snapshot := func() string {
		entries, _ := os.ReadDir(ledgerDir(dataDir))
		var b strings.Builder
		for _, e := range entries {
			if info, _ := e.Info(); e.Name() != "LOCK" {
				fmt.Fprintf(&b, "%s %d %v\n", e.Name(), info.Size(), info.ModTime().UnixNano())
			}
		}
		return b.String()
	}
	before := snapshot()
	out := filepath.Join(t.TempDir(), "p.ndjson")
	_, stderr, code := runCLI(t, "ledger", "export", "--data-dir", dataDir, "--poll", "p", "-o", out)
	if code != 1 || !strings.Contains(stderr, "damaged") {
		t.Fatalf("export of a damaged ledger: exit %d: %s", code, stderr)
	}
	if after := snapshot(); after != before {
		t.Fatalf("the export changed the damaged ledger:\n%s\nvs\n%s", before, after)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("a failed export left its output file")
	}
}

// One strict reader, one verdict: a file with a repeated or swapped line
// fails verify and merge alike (merge used to accept it).
func TestVerifyAndMergeAgreeOnReorderedFiles(t *testing.T) {
	files := writeExports(t)
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	lines[len(lines)-1] += "\n"
	variants := map[string]string{
		"repeated": strings.Join(append(append([]string{}, lines[:10]...), lines[9:]...), ""),
		"swapped":  strings.Join(append(append(append([]string{}, lines[:5]...), lines[6], lines[5]), lines[7:]...), ""),
	}
	for name, body := range variants {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), name+".ndjson")
			if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range [][]string{{"ledger", "verify", f}, {"ledger", "merge", f, files[1]}} {
				if _, stderr, code := runCLI(t, cmd...); code != 1 || !strings.Contains(stderr, "broken chain") {
					t.Errorf("%s on a %s line: exit %d: %s", cmd[1], name, code, stderr)
				}
			}
		})
	}
}

// The certificate of a poll nobody voted in is reproduced from an empty
// file with --poll; without it the digest is not that poll's.
func TestMergeEmptyPollWithPoll(t *testing.T) {
	want, err := ledger.ReconcileWith(ledger.ReconcileConfig{Poll: "quiet", ClosesAt: 1796083260000})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "empty.ndjson")
	os.WriteFile(f, nil, 0o600)
	out, stderr, code := runCLI(t, "ledger", "merge", "--json", "--poll", "quiet", "--closes-at", "1796083260000", f)
	if code != 0 || !strings.Contains(out, want.Digest) || !strings.Contains(out, `"total": 0`) {
		t.Fatalf("merge --poll of an empty file: exit %d\n%s%s", code, out, stderr)
	}
	if out, _, _ := runCLI(t, "ledger", "merge", "--json", "--closes-at", "1796083260000", f); strings.Contains(out, want.Digest) {
		t.Fatal("the digest does not depend on the poll")
	}
}
