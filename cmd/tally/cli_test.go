package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"tally/api"
	"tally/client"
	"tally/node"
)

// nodeCommands are every command that calls a node.
var nodeCommands = [][]string{
	{"poll", "create"}, {"poll", "list"}, {"poll", "show"}, {"poll", "close"}, {"poll", "extend"}, {"poll", "reveal"},
	{"poll", "result"}, {"poll", "certify"}, {"cluster"},
	{"quiz", "create"}, {"quiz", "show"}, {"quiz", "start"}, {"quiz", "close"}, {"quiz", "reveal"}, {"quiz", "end"},
	{"quiz", "result"}, {"quiz", "swarm"},
	{"ledger", "backup"}, {"ledger", "export"}, {"watch"}, {"load"}, {"vote"},
}

var nodeFlagInHelp = regexp.MustCompile(`(?m)^\s+-node\b`)

// One name for the node's address: every command that calls a node shows
// --url in its help and $TALLY_URL as its default, still takes the old
// spelling --node, and refuses the two spellings with different values.
func TestEveryNodeCommandTakesURL(t *testing.T) {
	for _, cmd := range nodeCommands {
		name := strings.Join(cmd, " ")
		out, stderr, code := runCLI(t, append(append([]string{}, cmd...), "--help")...)
		if code != 0 || stderr != "" {
			t.Errorf("tally %s --help: %d %q", name, code, stderr)
		}
		if !strings.Contains(out, "  -url ") || !strings.Contains(out, "$TALLY_URL") {
			t.Errorf("tally %s --help shows no --url with $TALLY_URL:\n%s", name, out)
		}
		if nodeFlagInHelp.MatchString(out) {
			t.Errorf("tally %s --help shows the old spelling --node:\n%s", name, out)
		}
		if name == "ledger export" {
			continue // a list: both spellings add to it (below)
		}
		_, stderr, code = runCLI(t, append(append([]string{}, cmd...), "--node", "http://127.0.0.1:1", "--url", "http://127.0.0.1:2")...)
		if code != 2 || !strings.Contains(stderr, "give --url or its old spelling --node, not both") {
			t.Errorf("tally %s --node A --url B: %d %q", name, code, stderr)
		}
	}
	// The old spelling names the node; an address that is no URL is a usage error.
	for _, spelling := range []string{"--url", "--node"} {
		_, stderr, code := runCLI(t, "poll", "list", spelling, "ftp://x")
		if code != 2 || !strings.Contains(stderr, `"ftp://x": want the node's address`) {
			t.Errorf("poll list %s ftp://x: %d %q", spelling, code, stderr)
		}
		_, stderr, code = runCLI(t, "watch", spelling, "ftp://x")
		if code != 2 || !strings.Contains(stderr, `"ftp://x": want the node's address`) {
			t.Errorf("watch %s ftp://x: %d %q", spelling, code, stderr)
		}
	}
	t.Setenv("TALLY_URL", "ftp://from-env")
	if _, stderr, code := runCLI(t, "poll", "list"); code != 2 || !strings.Contains(stderr, `$TALLY_URL "ftp://from-env"`) {
		t.Errorf("poll list with a bad $TALLY_URL: %d %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, "ledger", "export", "--poll", "p", "--url", "http://a", "--data-dir", t.TempDir()); code != 2 || !strings.Contains(stderr, "not both") {
		t.Errorf("ledger export --url and --data-dir: %d %q", code, stderr)
	}
}

// Against a node with --admin-addr: ledger export honours $TALLY_URL (and
// the flags come first); a missing admin token is "required", a wrong one
// "not accepted"; tally cluster prints the whole view from the admin
// address and says where it is from the public port.
func TestExportTokenAndCluster(t *testing.T) {
	dataDir := t.TempDir()
	base, n := startTestNodeWith(t, dataDir, func(c *node.Config) { c.AdminAddr = "127.0.0.1:0" })
	t.Setenv("TALLY_TOKEN", "")
	t.Setenv("TALLY_ADMIN_TOKEN", "")
	t.Setenv("TALLY_ADMIN_URL", "")
	t.Setenv("TALLY_URL", base)
	if c := post(t, base+"/v1/polls", `{"id":"p","question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":600}`); c != 201 {
		t.Fatalf("create: %d", c)
	}
	vote(t, base, "p", "a", "v1")
	vote(t, base, "p", "b", "v2")

	// The admin token: none, a wrong one, each said as such (and the 401).
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"poll", "close", "--poll", "p"}, "", "admin token required"},
		{[]string{"poll", "close", "--poll", "p"}, "wrong", "admin token not accepted"},
		{[]string{"ledger", "backup", "-o", filepath.Join(t.TempDir(), "b")}, "", "admin token required"},
		{[]string{"ledger", "backup", "-o", filepath.Join(t.TempDir(), "b")}, "wrong", "admin token not accepted"},
		{[]string{"ledger", "export", "--poll", "p", "-o", t.TempDir()}, "", "admin token required"},
		{[]string{"ledger", "export", "--poll", "p", "-o", t.TempDir()}, "wrong", "admin token not accepted"},
	} {
		t.Setenv("TALLY_TOKEN", c.env)
		_, stderr, code := runCLI(t, c.args...)
		if code != 1 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "401") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s with token %q: %d %q, want %q", strings.Join(c.args, " "), c.env, code, stderr, c.want)
		}
		if c.env != "" && !strings.Contains(stderr, "$TALLY_TOKEN") {
			t.Errorf("%s: the error does not say where the token came from: %q", strings.Join(c.args, " "), stderr)
		}
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("nope\n"), 0o600)
	t.Setenv("TALLY_TOKEN", "")
	if _, stderr, code := runCLI(t, "poll", "close", "--poll", "p", "--token-file", tokenFile); code != 1 || !strings.Contains(stderr, "not accepted") || !strings.Contains(stderr, tokenFile) {
		t.Errorf("a wrong --token-file: %d %q", code, stderr)
	}

	// ledger export: $TALLY_URL when no flag names a source, not ./data.
	t.Setenv("TALLY_TOKEN", "tok")
	t.Chdir(t.TempDir()) // no ./data here
	out := t.TempDir()
	if _, stderr, code := runCLI(t, "ledger", "export", "--poll", "p", "-o", out); code != 0 || !strings.Contains(stderr, base) {
		t.Fatalf("export with $TALLY_URL: %d %q", code, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*-p.ndjson"))
	if len(files) != 1 {
		t.Fatalf("export with $TALLY_URL wrote %v", files)
	}
	if verified, _, code := runCLI(t, "ledger", "verify", files[0]); code != 0 || !strings.Contains(verified, "  2  ") {
		t.Fatalf("the export from $TALLY_URL: %d %s", code, verified)
	}
	// --url comes first (the old --node too): here a node that is not there.
	for _, spelling := range []string{"--url", "--node"} {
		if _, stderr, code := runCLI(t, "ledger", "export", "--poll", "p", spelling, "http://127.0.0.1:1", "-o", t.TempDir()); code != 1 || !strings.Contains(stderr, "127.0.0.1:1") {
			t.Errorf("export %s: %d %q", spelling, code, stderr)
		}
	}
	// --data-dir comes before $TALLY_URL: the running node's is locked,
	// and the error says how to export from it.
	if _, stderr, code := runCLI(t, "ledger", "export", "--poll", "p", "--data-dir", dataDir); code != 1 || !strings.Contains(stderr, "--url URL or $TALLY_URL") {
		t.Errorf("export --data-dir of a running node: %d %q", code, stderr)
	}
	// Neither: ./data, which is not here.
	t.Setenv("TALLY_URL", "")
	if _, stderr, code := runCLI(t, "ledger", "export", "--poll", "p"); code != 1 || !strings.Contains(stderr, "data") {
		t.Errorf("export without a source: %d %q", code, stderr)
	}
	t.Setenv("TALLY_URL", base)

	// tally cluster from the public port: the regions, and where the rest is.
	stdout, stderr, code := runCLI(t, "cluster")
	if code != 0 || !strings.Contains(stdout, "eu-west") || !strings.Contains(stdout, "STALENESS") || !strings.Contains(stderr, "--admin-url") {
		t.Fatalf("cluster on the public port: %d %q %q", code, stdout, stderr)
	}
	// From the admin address: members, regions, replica ids, NATS links, staleness.
	admin := "http://" + n.AdminAddr()
	for _, args := range [][]string{{"cluster", "--admin-url", admin}, {"cluster", "--url", admin}} {
		stdout, stderr, code = runCLI(t, args...)
		for _, want := range []string{"node", "audit", "replica", n.Replica(), "nats", "connected true", "gateways", "REGION", "STALENESS",
			"MEMBER", "REPLICA", "audit (this node)", "alive", "eu-west"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%s: no %q in\n%s", strings.Join(args, " "), want, stdout)
			}
		}
		if code != 0 || stderr != "" {
			t.Errorf("%s: %d %q", strings.Join(args, " "), code, stderr)
		}
	}
	t.Setenv("TALLY_ADMIN_URL", admin)
	stdout, _, code = runCLI(t, "cluster", "--json")
	var v api.ClusterView
	if code != 0 || json.Unmarshal([]byte(stdout), &v) != nil || v.Self != "audit" || len(v.Members) != 1 || v.Members[0].Replica != n.Replica() || v.NATS == nil {
		t.Errorf("cluster --json with $TALLY_ADMIN_URL: %d %s", code, stdout)
	}
}

// tally vote: one vote and the node's answer; a retry of its key is a
// duplicate; a voter token earned with --session or given with --token;
// a 504 outcome_unknown sent again with the same key until it is known.
func TestVote(t *testing.T) {
	base := startTestNode(t, t.TempDir())
	t.Setenv("TALLY_URL", "")
	if c := post(t, base+"/v1/polls", `{"id":"p","question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":600}`); c != 201 {
		t.Fatalf("create: %d", c)
	}
	field := func(out, name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `\s+(\S+)$`).FindStringSubmatch(out)
		if m == nil {
			return ""
		}
		return m[1]
	}
	out, stderr, code := runCLI(t, "vote", "--url", base, "--poll", "p", "--option", "a", "--voter", "alice", "--idem", "alice-1")
	id := field(out, "vote_id")
	if code != 0 || field(out, "status") != "accepted" || id == "" || field(out, "stamp") == "" || field(out, "voter") != "alice" {
		t.Fatalf("vote: %d %q %q", code, out, stderr)
	}
	t.Setenv("TALLY_URL", base)
	out, _, code = runCLI(t, "vote", "--poll", "p", "--option", "a", "--voter", "alice", "--idem", "alice-1", "--json")
	var r api.VoteResult
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Status != "duplicate" || r.VoteID != id {
		t.Fatalf("the same key again, from $TALLY_URL: %d %s", code, out)
	}
	if _, stderr, code := runCLI(t, "vote", "--poll", "p", "--option", "zz"); code != 1 || !strings.Contains(stderr, "invalid_option") {
		t.Fatalf("a wrong option: %d %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, "vote", "--poll", "p", "--option", "a", "--token", "t", "--session"); code != 2 || !strings.Contains(stderr, "not both") {
		t.Fatalf("--token and --session: %d %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, "vote", "--option", "a"); code != 2 || !strings.Contains(stderr, "--poll") {
		t.Fatalf("no --poll: %d %q", code, stderr)
	}

	// --token: a token earned before (by a Go client, as this command is).
	c, err := client.New(base, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := runCLI(t, "vote", "--poll", "p", "--option", "a", "--token", s.Token); code != 0 || field(out, "status") != "accepted" {
		t.Fatalf("vote --token: %d %q %q", code, out, stderr)
	}
	if _, stderr, code := runCLI(t, "vote", "--poll", "p", "--option", "a", "--token", "forged"); code != 1 || !strings.Contains(stderr, "session_") {
		t.Fatalf("vote with a forged token: %d %q", code, stderr)
	}
	// --session: the puzzle solved (after the node's pacing of this
	// address, which just issued a token), the token's voter votes.
	out, stderr, code = runCLI(t, "vote", "--poll", "p", "--option", "b", "--session")
	voter := field(out, "voter")
	if code != 0 || field(out, "status") != "accepted" || voter == "" || !strings.Contains(stderr, "voter token earned") || !strings.Contains(stderr, voter) {
		t.Fatalf("vote --session: %d %q %q", code, out, stderr)
	}

	// An edge that ledgers the vote but loses its answer (504
	// outcome_unknown): the same request goes again, the same key, and the
	// node's definitive answer is printed.
	target, _ := url.Parse(base)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	var bodies []string
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		mu.Lock()
		bodies = append(bodies, string(b))
		first := len(bodies) == 1
		mu.Unlock()
		if !first {
			proxy.ServeHTTP(w, r)
			return
		}
		loseAnswer(w, r, proxy)
	}))
	defer edge.Close()
	out, stderr, code = runCLI(t, "vote", "--url", edge.URL, "--poll", "p", "--option", "b", "--voter", "bob")
	mu.Lock()
	defer mu.Unlock()
	if code != 0 || field(out, "status") != "duplicate" || field(out, "vote_id") == "" || len(bodies) != 2 || bodies[0] != bodies[1] {
		t.Fatalf("a vote answered 504 once: %d %q %q; the edge saw %q", code, out, stderr, bodies)
	}
}
