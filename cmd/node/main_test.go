package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"tally/internal/testbin"
	"tally/node"
)

func TestHelpAndVersionExitZero(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"healthcheck", "--help"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || !strings.Contains(out.String(), "usage") || errb.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"--version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "tally-node ") {
		t.Errorf("--version: %d %q", code, out.String())
	}
	for _, args := range [][]string{{"--bogus"}, {"extra"}, {"--log-format", "xml"}, {"--config", "/nonexistent/tally.yaml"},
		{"--tick", "fast"}, {"--tick"}, {"--max-viewers", "many"}, {"--join", "nohost"}, {"--role", "boss", "--data-dir", t.TempDir()},
		{"--ack-copies", "3", "--data-dir", t.TempDir()}, {"--ack-copies", "2", "--data-dir", t.TempDir()},
		{"--ack-copies-degrade", "--data-dir", t.TempDir()}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || strings.Count(errb.String(), "\n") != 1 || out.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line", args, code, errb.String())
		}
	}
	// A data dir that cannot be made or written: the same, naming the flag.
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, nil, 0o600)
	for _, dir := range []string{filepath.Join(file, "data"), file} {
		var out, errb bytes.Buffer
		if code := run([]string{"--data-dir", dir, "--http-addr", "127.0.0.1:0"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--data-dir "+dir) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("--data-dir %s: exit %d, stderr %q; want 2 and one line naming --data-dir", dir, code, errb.String())
		}
	}
	// A gossip or NATS port another process holds: refused before the
	// banner (nothing on stdout), one line naming the flag.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, flagName := range []string{"--gossip-addr", "--nats-addr"} {
		var out, errb bytes.Buffer
		args := []string{"--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--nats-addr", "127.0.0.1:0", flagName, held.Addr().String()}
		if code := run(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "tally-node: bad configuration: "+flagName+" ") || strings.Count(errb.String(), "tally-node:") != 1 || out.Len() != 0 {
			t.Errorf("%s on a port taken: exit %d, stdout %q, stderr %q; want 2, no banner, one line naming the flag", flagName, code, out.String(), errb.String())
		}
	}
	// A bad environment value is a configuration error like a bad flag.
	t.Setenv("TALLY_TICK", "fast")
	var out2, errb2 bytes.Buffer
	if code := run([]string{"--data-dir", t.TempDir()}, &out2, &errb2); code != 2 || !strings.Contains(errb2.String(), `$TALLY_TICK="fast" (--tick): want a duration`) {
		t.Errorf("TALLY_TICK=fast: exit %d, %q", code, errb2.String())
	}
	os.Unsetenv("TALLY_TICK")
	// Commands are not settings: $TALLY_VERSION (an image tag) is not --version.
	t.Setenv("TALLY_VERSION", "1.4.2")
	fs, _, version := newFlagSet(&node.Config{})
	if err := fs.Parse(nil); err != nil || *version {
		t.Errorf("TALLY_VERSION set --version: %v %v", err, *version)
	}
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.PrintDefaults()
	if strings.Count(help.String(), "[$TALLY_CONFIG]") != 1 || strings.Contains(help.String(), "$TALLY_VERSION") {
		t.Errorf("--help's environment names:\n%s", help.String())
	}
}

func TestHealthcheck(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		if status == http.StatusOK {
			w.Write([]byte(`{"status":"ready"}`))
		}
	}))
	defer srv.Close()
	check := func(url string) int {
		var out, errb bytes.Buffer
		return run([]string{"healthcheck", "--url", url, "--timeout", "2s"}, &out, &errb)
	}
	if c := check(srv.URL + "/readyz"); c != 0 {
		t.Fatalf("ready node: exit %d", c)
	}
	status = http.StatusServiceUnavailable
	if c := check(srv.URL + "/readyz"); c != 1 {
		t.Fatalf("draining node: exit %d", c)
	}
	srv.Close()
	if c := check(srv.URL + "/readyz"); c != 1 {
		t.Fatalf("no node: exit %d", c)
	}
	if c := check("ftp://x/readyz"); c != 2 {
		t.Fatalf("not http: exit %d", c)
	}
	t.Setenv("TALLY_HTTP_ADDR", ":9999")
	t.Setenv("TALLY_TLS_CERT", "/x.pem")
	if u, err := defaultHealthURL(""); err != nil || u != "https://127.0.0.1:9999/readyz" {
		t.Fatalf("default URL %s %v", u, err)
	}
	os.Unsetenv("TALLY_HTTP_ADDR")
	os.Unsetenv("TALLY_TLS_CERT")
	file := filepath.Join(t.TempDir(), "tally.yaml")
	os.WriteFile(file, []byte("http-addr: \":7070\"\n"), 0o600)
	if u, err := defaultHealthURL(file); err != nil || u != "http://127.0.0.1:7070/readyz" {
		t.Fatalf("default URL from --config: %s %v", u, err)
	}
	// A 200 that is not a node's readiness answer (the page) is not ready.
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<!doctype html>")) }))
	defer page.Close()
	if c := check(page.URL + "/"); c != 1 {
		t.Fatalf("the page: exit %d, want 1", c)
	}
}

// The binary logs JSON when asked, every line of it, and a normal stop
// (SIGTERM) logs nothing at warning level or above and exits 0.
func TestJSONLogsAndACleanStop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	bin, err := testbin.Node()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "tally.yaml")
	os.WriteFile(cfgFile, []byte("http-addr: 127.0.0.1:0\ngossip-addr: 127.0.0.1:0\nnats-addr: 127.0.0.1:0\nnats-cluster-addr: ''\nnats-gateway-addr: ''\nnats-leaf-addr: ''\ndrain: 0s\nlog-format: json\n"), 0o600)
	cmd := exec.Command(bin, "--config", cfgFile, "--data-dir", filepath.Join(dir, "data"), "--region", "eu-west")
	cmd.Env = append(os.Environ(), "TALLY_LOG_LEVEL=debug")
	stdout, _ := cmd.StdoutPipe()
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var url string
	re := regexp.MustCompile(`listening on (http://\S+)`)
	for sc := bufio.NewScanner(stdout); sc.Scan(); {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
			break
		}
	}
	if url == "" {
		t.Fatalf("no address printed; log:\n%s", logs.String())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out, errb bytes.Buffer
		if run([]string{"healthcheck", "--url", url + "/readyz"}, &out, &errb) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready: %s", errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, logs.String())
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	levels := map[string]int{}
	for _, line := range lines {
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Msg == "" {
			t.Errorf("not a JSON log line: %q", line)
			continue
		}
		levels[rec.Level]++
		if rec.Level == "WARN" || rec.Level == "ERROR" {
			t.Errorf("a normal start and stop logged %s: %s", rec.Level, line)
		}
	}
	if levels["DEBUG"] == 0 && levels["INFO"] == 0 {
		t.Fatalf("no log lines at all: %v", levels)
	}
}

// TestMain removes the node binary a test built (internal/testbin), once
// no test needs it.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}
