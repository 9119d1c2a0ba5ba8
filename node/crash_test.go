package node

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/internal/testwait"
	"tally/ledger"
)

// procNode is the real binary running as a child process.
type procNode struct {
	cmd *exec.Cmd
	url string
	log *lockedBuffer // its standard error: the log
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startProcess runs the node binary on dir and waits until /readyz
// answers 200; extra flags come last and win.
func startProcess(t *testing.T, bin, dir string, extra ...string) *procNode {
	t.Helper()
	p := startProcessNoWait(t, bin, dir, extra...)
	waitFor(t, func() bool {
		res, err := http.Get(p.url + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	return p
}

// startProcessNoWait is startProcess returning as soon as the node
// listens, before it is ready.
func startProcessNoWait(t *testing.T, bin, dir string, extra ...string) *procNode {
	t.Helper()
	args := append([]string{"--data-dir", dir, "--http-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0",
		"--nats-addr", "127.0.0.1:0", "--nats-cluster-addr", "", "--nats-gateway-addr", "", "--nats-leaf-addr", "", "--admin-token", testToken,
		"--rate-ip", "0", "--rate-voter", "0", "--trust-floor", "0", "--demo=false"}, extra...)
	if !slices.Contains(extra, "--ack-copies") {
		args = append(args, "--ack-copies", "1") // most tests run one full node in a cluster; those of the two-copy rule say 2
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TALLY_GOSSIP_KEY="+testGossipKey) // never on a command line
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	re := regexp.MustCompile(`listening on (http://\S+)`)
	p := &procNode{cmd: cmd, log: logs}
	for lines.Scan() {
		if m := re.FindStringSubmatch(lines.Text()); m != nil {
			p.url = m[1]
			break
		}
	}
	if p.url == "" {
		cmd.Wait() // its stdout closed: it exited; its log says why (a port taken since freePort chose it?)
		t.Fatalf("node did not print its address; its log:\n%s", logs.String())
	}
	go io.Copy(io.Discard, stdout)
	return p
}

func post(url, body string, headers ...string) (int, []byte, error) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// TestKill9KeepsEveryAckedVote is invariant 1 and 2 at process level: vote
// from several clients, kill -9 the node mid-stream, restart it, and check
// that every acknowledged vote is in the ledger once, the live tally equals
// the reconciled ledger, and retries of acknowledged votes still answer
// "duplicate" with the same vote id.
func TestKill9KeepsEveryAckedVote(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	bin := buildNodeBinary(t)
	dir := t.TempDir()
	p := startProcess(t, bin, dir)
	if code, body, err := post(p.url+"/v1/polls", `{"id":"p","question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"},{"id":"c","label":"C"}],"duration_s":3600}`,
		"Authorization", "Bearer "+testToken); err != nil || code != 201 {
		t.Fatalf("create poll: %d %s %v", code, body, err)
	}

	type acked struct{ body, voteID string }
	var mu sync.Mutex
	var acks []acked
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := vote([]string{"a", "b", "c"}[(c+i)%3], fmt.Sprintf("v%d-%d", c, i%25), fmt.Sprintf("c%d-%d", c, i))
				code, resp, err := post(p.url+"/v1/polls/p/votes", body)
				if err != nil || code != 200 {
					return // the node died under us
				}
				var r struct{ Results []Result }
				json.Unmarshal(resp, &r)
				mu.Lock()
				acks = append(acks, acked{body, r.Results[0].VoteID})
				mu.Unlock()
			}
		}()
	}
	// (Longer than waitFor's 10 s: 400 fsynced votes took longer than that
	// once, with the race detector's builds beside it on two cores.)
	testwait.For(t, 60*time.Second, "400 votes acknowledged", func() bool { mu.Lock(); defer mu.Unlock(); return len(acks) >= 400 })
	if err := p.cmd.Process.Kill(); err != nil { // SIGKILL, mid-stream
		t.Fatal(err)
	}
	p.cmd.Wait()
	close(stop)
	wg.Wait()

	q := startProcess(t, bin, dir)
	res, err := http.NewRequest("GET", q.url+"/v1/polls/p/ledger", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Header.Set("Authorization", "Bearer "+testToken)
	exp, err := http.DefaultClient.Do(res)
	if err != nil {
		t.Fatal(err)
	}
	export, _ := io.ReadAll(exp.Body)
	exp.Body.Close()
	result, err := ledger.Reconcile(ledger.ReadNDJSON(bytes.NewReader(export)))
	if err != nil {
		t.Fatal(err)
	}
	if result.Duplicates != 0 {
		t.Fatalf("a vote was ledgered twice: %+v", result)
	}
	ids := map[string]bool{}
	for r, err := range ledger.ReadNDJSON(bytes.NewReader(export)) {
		if err != nil {
			t.Fatal(err)
		}
		ids[r.ID().String()] = true
	}
	for _, a := range acks {
		if !ids[a.voteID] {
			t.Fatalf("acked vote %s is not in the ledger", a.voteID)
		}
		code, resp, err := post(q.url+"/v1/polls/p/votes", a.body)
		if err != nil || code != 200 || !strings.Contains(string(resp), `"status":"duplicate"`) || !strings.Contains(string(resp), a.voteID) {
			t.Fatalf("retry of %s after restart: %d %s %v", a.voteID, code, resp, err)
		}
	}
	getRes, err := http.Get(q.url + "/v1/polls/p")
	if err != nil {
		t.Fatal(err)
	}
	var view struct {
		Totals map[string]uint64
		Total  uint64
	}
	json.NewDecoder(getRes.Body).Decode(&view)
	getRes.Body.Close()
	if view.Total != result.Total || len(acks) == 0 {
		t.Fatalf("live %+v, reconciled %+v", view, result)
	}
	for o, n := range result.Totals {
		if view.Totals[o] != n {
			t.Fatalf("option %s: live %d, reconciled %d", o, view.Totals[o], n)
		}
	}
	t.Logf("%d votes acknowledged before kill -9; %d records after restart", len(acks), result.Records)
	os.RemoveAll(dir)
}

// Result mirrors the ack of one vote in the API.
type Result struct {
	Idem   string `json:"idem"`
	Status string `json:"status"`
	VoteID string `json:"vote_id"`
}

// regionAndProcessFlags starts an in-process eu-west node (on the real
// clock, as a process has) with a poll "p", and returns it with a data dir
// and the flags that make the node binary us-east joined to it, at a
// gossip address fixed up front so a killed process comes back there.
func regionAndProcessFlags(t *testing.T) (eu *testNode, dir string, flags []string) {
	t.Helper()
	eu = startNode(t, t.TempDir(), func(c *Config) { c.Region, c.Now = "eu-west", time.Now })
	eu.createPoll(t, "p")
	gossipAddr := freePort(t)
	return eu, t.TempDir(), []string{"--region", "us-east", "--node-name", "us-east-proc", "--join", eu.GossipAddr(), "--gossip-addr", gossipAddr,
		"--gossip-profile", "local", "--push-pull-interval", "500ms", "--nats-cluster-addr", "127.0.0.1:0", "--nats-gateway-addr", "127.0.0.1:0", "--nats-leaf-addr", "127.0.0.1:0"}
}

// TestKill9InACluster: a node of a two-region cluster is killed with
// SIGKILL while taking votes and restarted on its data dir; afterwards both
// regions show the same tally, holding every acknowledged vote.
func TestKill9InACluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	bin := buildNodeBinary(t)
	a, dir, flags := regionAndProcessFlags(t)
	b := startProcess(t, bin, dir, flags...)
	waitFor(t, func() bool { return len(a.gossip.Members()) == 2 })
	waitFor(t, func() bool {
		res, err := http.Get(b.url + "/v1/polls/p")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})

	var mu sync.Mutex
	acked := 0
	var stopped []string // why a voter stopped before the kill
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				code, body, err := post(b.url+"/v1/polls/p/votes", vote([]string{"a", "b", "c"}[i%3], fmt.Sprintf("b%d-%d", c, i), fmt.Sprintf("b%d-%d", c, i)))
				if err != nil || code != 200 {
					mu.Lock()
					stopped = append(stopped, fmt.Sprintf("%d %s %v", code, body, err))
					mu.Unlock()
					return // killed
				}
				mu.Lock()
				acked++
				mu.Unlock()
			}
		}()
	}
	// (Longer than waitFor's 10 s: two cores shared with the whole test
	// command; a voter that stopped early says why.)
	testwait.For(t, 60*time.Second, "200 votes acknowledged at b", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(stopped) == 4 {
			t.Fatalf("every voter stopped before the kill, at %d acks: %v", acked, stopped)
		}
		return acked >= 200
	})
	if err := b.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	b.cmd.Wait()
	wg.Wait()
	idsAtA := map[string]any{} // key → the vote id a answered, for votes a took while b was down
	for i := range 10 {
		key := fmt.Sprintf("a-%d", i)
		r := result(t, a.call(t, "POST", "/v1/polls/p/votes", vote("a", key, key)), 0)
		if r["status"] != "accepted" {
			t.Fatalf("vote at a: %v", r)
		}
		idsAtA[key] = r["vote_id"]
	}
	b = startProcess(t, bin, dir, flags...)
	// Ready means caught up: a retry at the restarted b of a vote a took
	// while it was down gets a's answer, not a new vote (issue 26, item 1).
	for key, id := range idsAtA {
		code, body, err := post(b.url+"/v1/polls/p/votes", vote("a", key, key))
		if err != nil || code != 200 || !strings.Contains(string(body), `"duplicate"`) || !strings.Contains(string(body), fmt.Sprint(id)) {
			t.Fatalf("retry at the restarted b of %s (a answered %v): %d %s %v", key, id, code, body, err)
		}
	}
	// Every acked vote of b is in its ledger (at most one unacked
	// in-flight vote per client may be there too), and both regions agree.
	var total int64
	waitFor(t, func() bool {
		ta := a.totals(t, "p")
		res, err := http.Get(b.url + "/v1/polls/p")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		var vb struct{ Total int64 }
		json.NewDecoder(res.Body).Decode(&vb)
		total = ta["_total"]
		return total == vb.Total && total >= int64(acked)+10
	})
	if total > int64(acked)+10+4 {
		t.Fatalf("total %d: more than the %d acked votes plus one in flight per client", total, acked+10)
	}

	// Across regions after the crash: b's voters change their mind at a,
	// a's at b, and b's clients retry acked requests at a. The live tally
	// of both regions converges to what certification computes from the
	// two ledgers now.
	for i := range 20 {
		a.vote(t, "p", "c", fmt.Sprintf("b0-%d", i))
	}
	for i := range 5 {
		code, _, err := post(b.url+"/v1/polls/p/votes", vote("b", fmt.Sprintf("a-%d", i), fmt.Sprintf("a-%d-again", i)))
		if err != nil || code != 200 {
			t.Fatalf("change of mind at b: %d %v", code, err)
		}
	}
	// A retry is answered duplicate where the region holds the first
	// vote's ballot: wait until a holds every ballot of b (the restarted
	// b serves them to a's catch-up).
	waitFor(t, func() bool {
		st, _ := a.state.Ballots("p")
		tally, _ := a.state.Tally("p")
		var records uint64
		for _, n := range tally.RecordCounts() {
			records += n
		}
		return uint64(st.Ballots) == records
	})
	for i := range 10 {
		id := fmt.Sprintf("b1-%d", i)
		if r := result(t, a.call(t, "POST", "/v1/polls/p/votes", vote([]string{"a", "b", "c"}[i%3], id, id)), 0); r["status"] != "duplicate" {
			t.Fatalf("retry at a of b's acked vote %s: %v", id, r)
		}
	}
	waitFor(t, func() bool {
		exportB, err := getAdmin(b.url + "/v1/polls/p/ledger")
		if err != nil {
			return false
		}
		want, err := ledger.Reconcile(ledger.ReadNDJSON(bytes.NewReader(exportB)), a.Ledger().Scan("p"))
		if err != nil {
			t.Fatal(err)
		}
		ta := a.totals(t, "p")
		res, err := http.Get(b.url + "/v1/polls/p")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		var vb struct{ Totals map[string]int64 }
		json.NewDecoder(res.Body).Decode(&vb)
		for _, o := range []string{"a", "b", "c"} {
			if ta[o] != int64(want.Totals[o]) || vb.Totals[o] != int64(want.Totals[o]) {
				return false
			}
		}
		return true
	})

	// After the close, a retry of an acknowledged key keeps its first
	// answer at either region (issue 26, item 2).
	if r := a.admin(t, "POST", "/v1/polls/p/close", ""); r.status != http.StatusOK {
		t.Fatal(r.raw)
	}
	waitFor(t, func() bool {
		res, err := http.Get(b.url + "/v1/polls/p")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		var v struct{ Status string }
		json.NewDecoder(res.Body).Decode(&v)
		return v.Status != "open"
	})
	for key, id := range idsAtA {
		for _, url := range []string{a.url, b.url} {
			code, body, err := post(url+"/v1/polls/p/votes", vote("a", key, key))
			if err != nil || code != 200 || !strings.Contains(string(body), `"duplicate"`) || !strings.Contains(string(body), fmt.Sprint(id)) {
				t.Fatalf("retry after the close at %s of %s (first answered %v): %d %s %v", url, key, id, code, body, err)
			}
		}
		break
	}
	code, body, err := post(b.url+"/v1/polls/p/votes", vote("a", "b1-0", "b1-0"))
	if err != nil || code != 200 || !strings.Contains(string(body), `"duplicate"`) {
		t.Fatalf("retry after the close at b of its own acked vote: %d %s %v", code, body, err)
	}
}

// getAdmin fetches url with the test admin token.
func getAdmin(url string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %d", url, res.StatusCode)
	}
	return io.ReadAll(res.Body)
}
