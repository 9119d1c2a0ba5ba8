package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tally/internal/testbin"
)

// buildNodeBinary returns the node binary for process-level tests
// ($TALLY_NODE_BIN, or built once for this test binary).
func buildNodeBinary(t *testing.T) string {
	t.Helper()
	bin, err := testbin.Node()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestSIGTERMDrainsWithoutFailingAnAck drives votes through a SIGTERM of
// the real binary in a two-region cluster. The stopping node answers
// /readyz 503 at once and keeps serving for --drain; then it stops
// accepting and finishes what is in flight. Clients fail over to the other
// region on a connection error, retrying the same idempotency key. No
// request the stopping node answered failed, every acknowledged vote is in
// one of the two ledgers, the node exits 0, and its log has none of the
// warnings a normal stop used to print.
func TestSIGTERMDrainsWithoutFailingAnAck(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	bin := buildNodeBinary(t)
	a := startNode(t, t.TempDir(), func(c *Config) {
		c.Region, c.Now = "eu-west", time.Now
		c.Limits.IPRate = 0 // the clients fail over here, all from 127.0.0.1
	})
	a.createPoll(t, "p")
	dir := t.TempDir()
	b := startProcess(t, bin, dir, "--region", "us-east", "--node-name", "us-east-proc", "--join", a.GossipAddr(),
		"--gossip-profile", "local", "--nats-cluster-addr", "127.0.0.1:0", "--nats-gateway-addr", "127.0.0.1:0", "--nats-leaf-addr", "127.0.0.1:0", "--drain", "3s",
		"--rate-ip", "0") // every client is 127.0.0.1: this test is about the drain, not the address budget
	waitFor(t, func() bool {
		res, err := http.Get(b.url + "/v1/polls/p")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})

	var mu sync.Mutex
	acked := map[string]bool{} // idem → acknowledged by someone
	var failures []string      // answers from the stopping node that were not acks
	var atB, atA int
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				idem := fmt.Sprintf("c%d-%d", c, i)
				body := vote([]string{"a", "b", "c"}[i%3], idem, idem)
				code, raw, err := post(b.url+"/v1/polls/p/votes", body)
				where := &atB
				if err != nil { // the node stopped accepting: fail over, same key
					code, raw, err = post(a.url+"/v1/polls/p/votes", body)
					where = &atA
				}
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, fmt.Sprintf("%s: %v", idem, err))
				case code != 200 || !strings.Contains(string(raw), `"status":"accepted"`) && !strings.Contains(string(raw), `"status":"duplicate"`):
					failures = append(failures, fmt.Sprintf("%s: %d %s", idem, code, raw))
				default:
					acked[idem] = true
					*where++
				}
				mu.Unlock()
			}
		}()
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return atB >= 100 })
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Draining: not ready, still serving votes.
	waitFor(t, func() bool {
		res, err := http.Get(b.url + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusServiceUnavailable
	})
	mu.Lock()
	drainingFrom := atB
	mu.Unlock()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return atB > drainingFrom }) // votes acked while draining
	exited := make(chan error, 1)
	go func() { exited <- b.cmd.Wait() }()
	var exitErr error
	waitFor(t, func() bool {
		select {
		case exitErr = <-exited:
			return true
		default:
			return false
		}
	})
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return atA >= 50 }) // the clients moved over
	close(stop)
	wg.Wait()
	if exitErr != nil {
		t.Fatalf("the node did not exit cleanly: %v\n%s", exitErr, b.log)
	}
	if len(failures) > 0 {
		t.Fatalf("%d requests failed, first: %s", len(failures), failures[0])
	}

	// Every acked vote is in one of the ledgers.
	stored := map[string]bool{}
	r := a.admin(t, "GET", "/v1/polls/p/ledger", "")
	for line := range strings.Lines(r.raw) {
		var rec struct{ Idem string }
		json.Unmarshal([]byte(line), &rec)
		stored[rec.Idem] = true
	}
	b2 := startProcess(t, bin, dir, "--region", "us-east", "--node-name", "us-east-proc", "--join", a.GossipAddr(),
		"--gossip-profile", "local", "--nats-cluster-addr", "127.0.0.1:0", "--nats-gateway-addr", "127.0.0.1:0", "--nats-leaf-addr", "127.0.0.1:0")
	req, _ := http.NewRequest("GET", b2.url+"/v1/polls/p/ledger", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(res.Body)
	for {
		var rec struct{ Idem string }
		if dec.Decode(&rec) != nil {
			break
		}
		stored[rec.Idem] = true
	}
	res.Body.Close()
	for idem := range acked {
		if !stored[idem] {
			t.Errorf("acknowledged vote %s is in neither ledger", idem)
		}
	}
	log := b.log.String()
	_, stopping, ok := strings.Cut(log, "draining")
	if !ok {
		t.Fatalf("the log does not say the node drained:\n%s", log)
	}
	for _, bad := range []string{"nats disconnected", "timeout waiting for leave broadcast", "level=WARN", "level=ERROR"} {
		if strings.Contains(stopping, bad) {
			t.Errorf("a normal stop logged %q:\n%s", bad, stopping)
		}
	}
	t.Logf("acked %d votes (%d at the stopping node, %d after failing over)", len(acked), atB, atA)
}
