package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"tally/ingest"
	"tally/internal/testbin"
	"tally/internal/testwait"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	if code == 0 {
		err := goleak.Find(
			// memberlist's probe of a peer outlives Shutdown by up to a probe
			// interval when the peer's ack is lost (as the WAN delay test's
			// are, in flight at shutdown); it ends on its own.
			goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"),
		)
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// fakeClock is a wall clock the test moves by hand.
type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// testNode is a node serving on a loopback port.
type testNode struct {
	*Node
	url    string
	client *http.Client // trusts the node's CA when it serves TLS
	clock  *fakeClock
	stop   func() error
}

const testToken = "test-admin-token"

// testGossipKey is the test clusters' key: they run authenticated.
const testGossipKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// nodeNames numbers the nodes of a test binary: names are unique in a cluster.
var nodeNames atomic.Int64

func startNode(t testing.TB, dir string, mutate func(*Config)) *testNode {
	t.Helper()
	return startNodeAt(t, dir, time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixMilli(), mutate)
}

// startNodeAt starts a node whose fake clock reads ms (a node restarted
// into a cluster whose clocks the test has moved on).
func startNodeAt(t testing.TB, dir string, ms int64, mutate func(*Config)) *testNode {
	t.Helper()
	clock := &fakeClock{}
	clock.ms.Store(ms)
	cfg := testConfig(dir, clock)
	if mutate != nil {
		mutate(&cfg)
	}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(context.Background()) }()
	tn := &testNode{Node: n, url: n.scheme() + "://" + n.Addr(), client: http.DefaultClient, clock: clock}
	if n.tls != nil {
		tn.client = n.peerClient()
	}
	var once atomic.Bool
	tn.stop = func() error {
		if !once.CompareAndSwap(false, true) {
			return nil
		}
		err := n.Close(context.Background())
		if rerr := <-done; rerr != err {
			return fmt.Errorf("Close said %v, Run %v", err, rerr)
		}
		return err
	}
	t.Cleanup(func() {
		if err := tn.stop(); err != nil {
			t.Error(err)
		}
	})
	waitFor(t, func() bool { return n.ready.Load() })
	return tn
}

// testConfig is a node's configuration for tests: loopback ports chosen
// by the system, a unique name, the clock given, no output.
func testConfig(dir string, clock *fakeClock) Config {
	cfg := DefaultConfig()
	cfg.DataDir, cfg.HTTPAddr, cfg.AdminToken = dir, "127.0.0.1:0", testToken
	cfg.NodeName = fmt.Sprintf("node-%d", nodeNames.Add(1))
	cfg.GossipAddr, cfg.GossipProfile = "127.0.0.1:0", "local"
	cfg.NATSAddr, cfg.NATSClusterAddr, cfg.NATSGatewayAddr, cfg.NATSLeafAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Now, cfg.Stdout = clock.now, io.Discard
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Demo = false
	cfg.Drain = 0       // tests that drain say so
	cfg.VouchPace = 0   // tests that pace tokens say so (it runs on the process clock)
	cfg.CatchUpWait = 0 // tests of the catch-up gate say so
	cfg.GossipKey = testGossipKey
	cfg.AckCopies = 1 // most tests run one full node in a cluster; tests of the two-copy rule say 2
	return cfg
}

// waitFor polls cond until it holds or 10 s pass (testwait.For).
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, "the condition", cond)
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (r response) code() string {
	if e, ok := r.body["error"].(map[string]any); ok {
		return e["code"].(string)
	}
	return ""
}

// call sends a request; body is sent as JSON unless headers override the
// content type; an "Authorization" header may be given.
func (tn *testNode) call(t testing.TB, method, path, body string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, tn.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" || method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json") // as every client does (issue 58)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := tn.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := response{status: res.StatusCode, header: res.Header, raw: string(raw)}
	json.Unmarshal(raw, &out.body)
	return out
}

func (tn *testNode) admin(t testing.TB, method, path, body string) response {
	return tn.call(t, method, path, body, "Authorization", "Bearer "+testToken)
}

// createPoll creates poll id with options a, b, c open for a minute from now.
func (tn *testNode) createPoll(t testing.TB, id string) { t.Helper(); tn.createPollFor(t, id, 60) }

// createPollFor creates a poll of options a, b and c open for seconds,
// with a 5 s grace. A test that loads a cluster through faults and
// closes the poll itself gives it an hour: on a loaded machine a minute
// can pass before its faults are over.
func (tn *testNode) createPollFor(t testing.TB, id string, seconds int) {
	t.Helper()
	r := tn.admin(t, "POST", "/v1/polls", fmt.Sprintf(`{"id":"%s","question":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"},{"id":"c","label":"C"}],"duration_s":%d,"grace_s":5}`, id, seconds))
	if r.status != http.StatusCreated {
		t.Fatalf("create poll: %d %s", r.status, r.raw)
	}
}

func (tn *testNode) totals(t testing.TB, id string) map[string]int64 {
	t.Helper()
	r := tn.call(t, "GET", "/v1/polls/"+id, "")
	out := map[string]int64{}
	for k, v := range r.body["totals"].(map[string]any) {
		out[k] = int64(v.(float64))
	}
	out["_total"] = int64(r.body["total"].(float64))
	return out
}

// mustCIDRs parses comma-separated CIDRs or fails the program (test set-up).
func mustCIDRs(s string) []netip.Prefix {
	p, err := ingest.ParseCIDRs(s)
	if err != nil {
		panic(err)
	}
	return p
}

// closeTakesEffect waits until a close "now" of poll reached the node
// (its closes_at is at most a millisecond ahead of the fake clock) and
// moves the clock past it: a close takes effect after the votes stamped
// in its own millisecond, and a test's clock stands still.
func (tn *testNode) closeTakesEffect(t testing.TB, poll string) {
	t.Helper()
	waitFor(t, func() bool { d, ok := tn.state.Defs.Poll(poll); return ok && d.ClosesAt <= tn.clock.ms.Load()+1 })
	tn.clock.advance(time.Millisecond)
}

// adminGet GETs path at url with the admin token and fails the test
// unless the answer is 200; the caller closes the body.
func adminGet(t testing.TB, url, path string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url+path, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		t.Fatalf("GET %s at %s: %d", path, url, res.StatusCode)
	}
	return res
}
