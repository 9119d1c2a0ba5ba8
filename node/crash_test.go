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
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"tally/ledger"
)

// procNode is the real binary running as a child process.
type procNode struct {
	cmd *exec.Cmd
	url string
}

func startProcess(t *testing.T, bin, dir string) *procNode {
	t.Helper()
	cmd := exec.Command(bin, "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0",
		"--nats-addr", "127.0.0.1:0", "--nats-cluster-addr", "", "--nats-gateway-addr", "", "--admin-token", testToken,
		"--rate-ip", "0", "--rate-voter", "0", "--demo=false")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	re := regexp.MustCompile(`listening on (http://\S+)`)
	p := &procNode{cmd: cmd}
	for lines.Scan() {
		if m := re.FindStringSubmatch(lines.Text()); m != nil {
			p.url = m[1]
			break
		}
	}
	if p.url == "" {
		t.Fatal("node did not print its address")
	}
	go io.Copy(io.Discard, stdout)
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
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	bin := filepath.Join(t.TempDir(), "node")
	build := exec.Command("go", "build", "-o", bin, "tally/cmd/node")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(acks) >= 400 })
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
