package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"tally/api"
	"tally/internal/backup"
	"tally/ledger"
)

// Every command and subcommand answers --help and -h on stdout with exit
// status 0, as Go's tools do; a usage error exits 2.
func TestHelpExitsZero(t *testing.T) {
	lines := [][]string{{}, {"ledger"}, {"poll"}, {"quiz"}, {"quiz", "result"}}
	for _, sub := range []string{"verify", "merge", "export", "backup", "restore"} {
		lines = append(lines, []string{"ledger", sub})
	}
	for _, sub := range []string{"create", "list", "show", "close", "extend", "reveal", "result", "certify"} {
		lines = append(lines, []string{"poll", sub})
	}
	lines = append(lines, []string{"cluster"}, []string{"load"}, []string{"watch"})
	for _, line := range lines {
		for _, h := range []string{"--help", "-h", "help"} {
			if h == "help" && len(line) > 1 || h == "help" && len(line) == 1 && line[0] != "ledger" && line[0] != "poll" && line[0] != "quiz" {
				continue // "help" is a word only where a subcommand is expected
			}
			args := append(append([]string{}, line...), h)
			out, stderr, code := runCLI(t, args...)
			if code != 0 || !strings.Contains(out, "usage") || stderr != "" {
				t.Errorf("tally %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, stderr)
			}
			if strings.Contains(out, "must be 1-10") {
				t.Errorf("tally %s: help complains about flags not given: %q", strings.Join(args, " "), out)
			}
		}
	}
	for _, args := range [][]string{
		{}, {"nope"}, {"ledger"}, {"ledger", "nope"}, {"poll", "nope"}, {"poll", "create", "--bogus"},
		{"poll", "create", "--question", "Q"}, {"load", "--batch", "11"}, {"poll", "extend", "--poll", "p"},
		{"poll", "extend", "--poll", "p", "--by", "1m", "--closes-at", "2026-12-01T00:00:00Z"},
		{"poll", "create", "--closes-at", "tomorrow"}, {"ledger", "verify"}, {"cluster", "extra"},
	} {
		if _, stderr, code := runCLI(t, args...); code != 2 || stderr == "" {
			t.Errorf("tally %s: exit %d, stderr %q; want 2 and a reason", strings.Join(args, " "), code, stderr)
		}
	}
	for _, v := range []string{"--version", "version", "-version"} {
		if out, _, code := runCLI(t, v); code != 0 || !strings.HasPrefix(out, "tally ") || !strings.Contains(out, "go1") {
			t.Errorf("tally %s: %d %q", v, code, out)
		}
	}
}

var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// Every --json output names its fields in snake_case.
func TestJSONFieldsAreSnakeCase(t *testing.T) {
	for _, v := range []any{loadReport{}, swarmReport{}, ledger.Result{}, ledger.Chain{}, api.ResultView{}, api.PollView{}, api.ClusterView{}, clusterReport{}, api.PollPage{}, api.Leaderboard{}, api.Frame{}, api.VoteResponse{}, api.SessionResponse{}, api.QuizView{}, quizSwarmReport{}} {
		checkSnake(t, reflect.TypeOf(v), reflect.TypeOf(v).Name(), map[reflect.Type]bool{})
	}
}

func checkSnake(t *testing.T, typ reflect.Type, where string, seen map[reflect.Type]bool) {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map || typ.Kind() == reflect.Array {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || seen[typ] || typ.PkgPath() == "time" {
		return
	}
	seen[typ] = true
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			checkSnake(t, f.Type, where, seen)
			continue
		}
		if name == "" {
			name = f.Name // what encoding/json would write
		}
		if !snake.MatchString(name) {
			t.Errorf("%s.%s is written as %q, not snake_case", where, f.Name, name)
		}
		checkSnake(t, f.Type, where+"."+f.Name, seen)
	}
}

// The host's commands drive a running node: create, list, show, extend,
// reveal, close, the cluster, with the token from a flag, a file or the
// environment, and clear one-line errors.
func TestAdminCommands(t *testing.T) {
	base := startTestNode(t, t.TempDir())
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("tok\n"), 0o600)
	t.Setenv("TALLY_URL", base)
	t.Setenv("TALLY_TOKEN", "")
	t.Setenv("TALLY_ADMIN_TOKEN", "")

	// No token: refused by the node, one line, exit 1.
	_, stderr, code := runCLI(t, "poll", "create", "--id", "q1", "--question", "Best?", "--option", "a=Apples", "--option", "b")
	if code != 1 || !strings.Contains(stderr, "401") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("create without a token: %d %q", code, stderr)
	}
	out, stderr, code := runCLI(t, "poll", "create", "--token-file", tokenFile, "--id", "q1", "--question", "Best?",
		"--option", "a=Apples", "--option", "b", "--duration", "10m", "--hidden", "--event", "show-1")
	if code != 0 || !strings.Contains(out, "q1") || !strings.Contains(out, "Apples") || !strings.Contains(out, "hidden") {
		t.Fatalf("create: %d %q %q", code, out, stderr)
	}
	// A duplicate id is the node's error, passed on.
	if _, stderr, code := runCLI(t, "poll", "create", "--token-file", tokenFile, "--id", "q1", "--question", "Again?", "--option", "a", "--option", "b"); code != 1 || !strings.Contains(stderr, "exists") {
		t.Fatalf("duplicate create: %d %q", code, stderr)
	}
	vote(t, base, "q1", "a", "v1")
	vote(t, base, "q1", "b", "v2")
	vote(t, base, "q1", "a", "v3")

	t.Setenv("TALLY_TOKEN", "tok")
	out, _, code = runCLI(t, "poll", "list", "--json", "--event", "show-1")
	var list []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0]["id"] != "q1" || list[0]["total"] != 3.0 {
		t.Fatalf("list --json with the admin token: %d %s", code, out)
	}
	// Without the token a hidden poll shows no counts.
	t.Setenv("TALLY_TOKEN", "")
	out, _, code = runCLI(t, "poll", "show", "--poll", "q1")
	if code != 0 || strings.Contains(out, "total") || !strings.Contains(out, "Apples") {
		t.Fatalf("show without the token: %d %s", code, out)
	}
	t.Setenv("TALLY_TOKEN", "tok")
	if out, _, code := runCLI(t, "poll", "reveal", "--poll", "q1"); code != 0 || strings.Contains(out, "hidden") || !strings.Contains(out, "total") {
		t.Fatalf("reveal: %d %s", code, out)
	}
	out, _, code = runCLI(t, "poll", "extend", "--poll", "q1", "--by", "5m", "--json")
	var v api.PollView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.ClosesAt-v.OpensAt < 14*60_000 {
		t.Fatalf("extend: %d %s", code, out)
	}
	if out, _, code := runCLI(t, "poll", "close", "--poll", "q1"); code != 0 || !strings.Contains(out, "closed") {
		t.Fatalf("close: %d %s", code, out)
	}
	if _, stderr, code := runCLI(t, "poll", "extend", "--poll", "q1", "--by", "1m"); code != 1 || !strings.Contains(stderr, "409") {
		t.Fatalf("extend a closed poll: %d %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, "poll", "show", "--poll", "nope"); code != 1 || !strings.Contains(stderr, "poll_not_found") {
		t.Fatalf("show an unknown poll: %d %q", code, stderr)
	}
	out, _, code = runCLI(t, "poll", "list")
	if code != 0 || !strings.Contains(out, "POLL") || !strings.Contains(out, "q1") {
		t.Fatalf("list: %d %s", code, out)
	}
	if out, _, code := runCLI(t, "cluster"); code != 0 || !regexp.MustCompile(`(?m)^region\s+eu-west$`).MatchString(out) || !strings.Contains(out, "REPLICA") {
		t.Fatalf("cluster: %d %s", code, out)
	}
	// An unreachable node: one line, exit 1.
	if _, stderr, code := runCLI(t, "poll", "list", "--node", "http://127.0.0.1:1"); code != 1 || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("unreachable node: %d %q", code, stderr)
	}
}

// A backup taken from a running node restores into a new data dir, as the
// same replica, only with the operator's confirmation; the restored node
// serves the same votes and goes on appending to the same chains.
func TestBackupAndRestore(t *testing.T) {
	t.Setenv("TALLY_TOKEN", "tok")
	base := startTestNode(t, t.TempDir())
	if _, stderr, code := runCLI(t, "poll", "create", "--node", base, "--id", "b1", "--question", "Q?", "--option", "a", "--option", "b", "--duration", "1h"); code != 0 {
		t.Fatalf("create: %s", stderr)
	}
	for i := range 20 {
		vote(t, base, "b1", []string{"a", "b"}[i%3%2], fmt.Sprint("v", i))
	}
	dir := filepath.Join(t.TempDir(), "backup")
	out, stderr, code := runCLI(t, "ledger", "backup", "--node", base, "-o", dir)
	if code != 0 || !strings.Contains(out, "20 records of 1 poll with votes, chains verified") {
		t.Fatalf("backup: %d %q %q", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "admin-token")); err == nil {
		t.Fatal("the backup carries the admin token")
	}
	// The node made its session secret itself: the backup carries it, so
	// the voter tokens it issued stay good after a restore.
	if _, err := os.Stat(filepath.Join(dir, sessionSecretFile)); err != nil || !strings.Contains(stderr, "session secret") {
		t.Fatalf("the backup of a node that made its session secret does not carry it (or does not say so): %v %q", err, stderr)
	}
	// Not into a directory that holds something; no token, no backup.
	if _, _, code := runCLI(t, "ledger", "backup", "--node", base, "-o", dir); code != 1 {
		t.Fatalf("backup over a backup: %d", code)
	}
	if _, stderr, code := runCLI(t, "ledger", "backup", "--node", base, "--token", "wrong", "-o", t.TempDir()+"/x"); code != 1 || !strings.Contains(stderr, "401") {
		t.Fatalf("backup with a wrong token: %d %q", code, stderr)
	}
	data := filepath.Join(t.TempDir(), "restored")
	if _, stderr, code := runCLI(t, "ledger", "restore", "--from", dir, "--data-dir", data); code != 2 || !strings.Contains(stderr, "--original-is-gone") {
		t.Fatalf("restore without the confirmation: %d %q", code, stderr)
	}
	if _, err := os.Stat(data); err == nil {
		t.Fatal("an unconfirmed restore wrote the data dir")
	}
	if out, stderr, code := runCLI(t, "ledger", "restore", "--from", dir, "--data-dir", data, "--original-is-gone"); code != 0 || strings.Contains(stderr, "note:") {
		t.Fatalf("restore: %d %q %q", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(data, sessionSecretFile)); err != nil {
		t.Fatalf("the restore left out the session secret: %v", err)
	}
	// The exports of both nodes (the original stands in for a lost one
	// here) carry the same replica and chain.
	restored := startTestNode(t, data)
	out, _, code = runCLI(t, "poll", "show", "--node", restored, "--poll", "b1", "--json")
	var v api.PollView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Total == nil || *v.Total != 20 || v.Totals["a"] != 13 {
		t.Fatalf("restored node's poll: %d %s", code, out)
	}
	vote(t, restored, "b1", "b", "after-restore")
	exp := t.TempDir()
	for _, b := range []string{base, restored} {
		if _, stderr, code := runCLI(t, "ledger", "export", "--node", b, "--poll", "b1", "-o", exp); code != 0 {
			t.Fatalf("export: %s", stderr)
		}
	}
	files, _ := filepath.Glob(filepath.Join(exp, "*.ndjson"))
	for _, f := range files {
		out, stderr, code := runCLI(t, "ledger", "verify", "--json", f)
		var chains []ledger.Chain
		if code != 0 || json.Unmarshal([]byte(out), &chains) != nil || len(chains) != 1 {
			t.Fatalf("verify %s: %d %s %s", f, code, out, stderr)
		}
	}
}

// After a restore, the operator is told what becomes of the voter tokens
// when the backup does not carry the secret that signed them.
func TestSessionSecretNote(t *testing.T) {
	carried, without := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(carried, sessionSecretFile), []byte("s\n"), 0o600)
	for _, c := range []struct {
		dir, where, want string
	}{
		{carried, backup.SessionSecretInBackup, ""},
		{without, backup.SessionSecretConfigured, "start the restored node with the same one"},
		{without, "", "taken before backups carried it"},
	} {
		got := sessionSecretNote(backup.Manifest{SessionSecret: c.where}, c.dir)
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%q: %q, want %q", c.where, got, c.want)
		}
	}
}
