package node

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/api"
	"tally/internal/testwait"
	"tally/receipt"
)

// cast is one acknowledged vote and its receipt.
type cast struct {
	voter, option string
	last          bool // the voter's last vote: the one that counts
	rc            receipt.Receipt
	disp          string // what receipt.Verify found became of it
}

// TestReceiptsOnThreeRegionsWithEdges is issue 62's run: three regions
// of a full node and an edge, 300 voters voting through the edges, one
// in five changing their mind through another region's edge. Every vote
// is answered with a receipt; once the poll is certified every receipt's
// proof, asked of any edge, verifies against the cluster's keys: the
// last votes are counted for the option voted, the changed minds
// superseded and pointing at the voter's counted vote.
func TestReceiptsOnThreeRegionsWithEdges(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs six node processes")
	}
	c := startRegionCluster(t, buildNodeBinary(t), 1)
	full := c.procs[0]
	if code, body, err := post(full.url()+"/v1/polls", `{"id":"r","question":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"},{"id":"c","label":"C"}],"duration_s":3600,"grace_s":1}`,
		"Authorization", "Bearer "+testToken); err != nil || code != http.StatusCreated {
		t.Fatalf("create: %d %s %v", code, body, err)
	}
	for _, p := range c.procs {
		testwait.For(t, 30*time.Second, p.name+" serves the poll", func() bool { return getJSON(p.url()+"/v1/polls/r", &struct{}{}) == 200 })
	}
	start := time.Now()
	casts := castVotes(t, c, 300)
	t.Logf("%d votes cast in %v", len(casts), time.Since(start).Round(10*time.Millisecond))
	if code, body, err := post(full.url()+"/v1/polls/r/close", "", "Authorization", "Bearer "+testToken); err != nil || code != 200 {
		t.Fatalf("close: %d %s %v", code, body, err)
	}
	var cert api.ResultView
	for _, u := range c.procs {
		testwait.For(t, 90*time.Second, u.name+" serves the certified result", func() bool {
			return getJSON(u.url()+"/v1/polls/r/result", &cert) == 200 && cert.Status == "reconciled"
		})
	}
	// A vote retried after a 503 or 504 through an edge that failed over
	// meanwhile can be ledgered twice, at two full nodes: the tree then
	// holds more records than votes, and the second is a duplicate.
	if cert.Detail == nil || cert.Detail.Tree == nil || cert.Detail.Tree.Size < uint64(len(casts)) || cert.Total != 300 {
		t.Fatalf("the certificate: total %d, tree %+v (%d votes cast by 300 voters)", cert.Total, cert.Detail, len(casts))
	}
	keys := clusterKeys(t, c.edges[0].url())
	n := map[string]int{}
	for i := range casts {
		v := &casts[i]
		edge := c.edges[i%len(c.edges)]
		var p receipt.Proof
		testwait.For(t, 30*time.Second, "the proof of "+v.rc.VoteID+" at "+edge.name, func() bool {
			res, err := http.Get(edge.url() + "/v1/polls/r/proofs/" + v.rc.Leaf)
			if err != nil {
				return false
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode == http.StatusServiceUnavailable {
				return false // the index is being built: asked again
			}
			if res.StatusCode != 200 {
				t.Fatalf("the proof of %s at %s: %d %s", v.rc.VoteID, edge.name, res.StatusCode, b)
			}
			if p, err = receipt.DecodeProof(b); err != nil {
				t.Fatalf("the proof of %s: %v", v.rc.VoteID, err)
			}
			return true
		})
		got, err := receipt.Verify(v.rc, p, keys)
		if err != nil {
			t.Fatalf("the receipt of %s (%s's vote for %s): %v", v.rc.VoteID, v.voter, v.option, err)
		}
		if h, c := p.TreeHead, cert.Detail.Tree; h.Root != c.Root || h.Size != c.Size || h.By != c.By || !bytes.Equal(h.Sig, c.Sig) {
			t.Fatalf("the proof's tree head %+v, the certificate's %+v", p.TreeHead, cert.Detail.Tree)
		}
		v.disp = got.Disposition
		n[got.Disposition]++
		switch {
		case got.Disposition == receipt.Duplicate: // this copy of a vote ledgered twice: the first stands for it
			if got.Counted == nil || got.Counted.Voter != v.voter || got.Counted.Option != v.option {
				t.Fatalf("%s's vote for %s, ledgered twice: %+v, standing %+v", v.voter, v.option, got, got.Counted)
			}
		case v.last && (got.Disposition != receipt.Counted || got.Vote.Option != v.option || got.Vote.Voter != v.voter):
			t.Fatalf("%s's last vote for %s: %+v", v.voter, v.option, got)
		case !v.last && (got.Disposition != receipt.Superseded || got.Counted == nil || got.Counted.Voter != v.voter || got.Counted.Option != lastOption(casts, v.voter)):
			t.Fatalf("%s's changed vote for %s: %+v, counted %+v", v.voter, v.option, got, got.Counted)
		}
	}
	t.Logf("%d receipts checked through the edges: %d counted, %d superseded pointing at their voter's counted vote, %d copies of a vote ledgered twice (a retry through an edge that failed over); tree of %d, root %s",
		len(casts), n[receipt.Counted], n[receipt.Superseded], n[receipt.Duplicate], cert.Detail.Tree.Size, cert.Detail.Tree.Root)

	tally := buildTallyCLI(t)
	for _, step := range []func(){
		func() { verifyInJavaScript(t, c, casts) },
		func() { verifyWithTheCLI(t, tally, c, casts) },
		func() { mergeGivesTheRoot(t, tally, c, cert.Detail.Tree) },
	} {
		start := time.Now()
		step()
		t.Logf("(in %v)", time.Since(start).Round(10*time.Millisecond))
	}
}

// buildTallyCLI builds the tally command for a test.
func buildTallyCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tally")
	if out, err := exec.Command("go", "build", "-o", bin, "tally/cmd/tally").CombinedOutput(); err != nil {
		t.Fatalf("go build tally/cmd/tally: %v\n%s", err, out)
	}
	return bin
}

// verifyInJavaScript checks every receipt with the JavaScript client's
// verifyReceipt (Node.js, WebCrypto), each at the edge of its index,
// and wants the dispositions receipt.Verify found.
func verifyInJavaScript(t *testing.T, c *upgradeCluster, casts []cast) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node (Node.js 20+) is not installed; .ci/run installs it")
		}
		t.Log("node (Node.js) is not installed: the JavaScript client's check is skipped")
		return
	}
	type job struct {
		Receipt receipt.Receipt `json:"receipt"`
		URL     string          `json:"url"`
	}
	var jobs []job
	for i, v := range casts {
		jobs = append(jobs, job{v.rc, c.edges[i%len(c.edges)].url()})
	}
	in, _ := json.Marshal(jobs)
	file := filepath.Join(t.TempDir(), "receipts.json")
	if err := os.WriteFile(file, in, 0o600); err != nil {
		t.Fatal(err)
	}
	client, _ := filepath.Abs("../clients/js/index.js")
	script := `import { verifyReceipt } from ` + strconv.Quote("file://"+client) + `;
import { readFileSync } from "node:fs";
const jobs = JSON.parse(readFileSync(process.argv[1], "utf8"));
const out = [];
for (let i = 0; i < jobs.length; i += 12) { // twelve pages at a time
  const batch = jobs.slice(i, i + 12);
  out.push(...await Promise.all(batch.map(j => verifyReceipt(j.receipt, { baseUrl: j.url }))));
}
console.log(JSON.stringify(out));`
	cmd := exec.Command(node, "--input-type=module", "-e", script, file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("the JavaScript check: %v\n%s", err, stderr.String())
	}
	var got []struct {
		OK          bool   `json:"ok"`
		Step        string `json:"step"`
		Message     string `json:"message"`
		Disposition string `json:"disposition"`
		Vote        struct {
			Option string `json:"option"`
		} `json:"vote"`
		Counted *struct {
			Option string `json:"option"`
		} `json:"counted"`
	}
	if err := json.Unmarshal(raw, &got); err != nil || len(got) != len(casts) {
		t.Fatalf("the JavaScript check answered %d results for %d receipts: %v", len(got), len(casts), err)
	}
	for i, v := range casts {
		g := got[i]
		switch {
		case !g.OK:
			t.Fatalf("JavaScript: the receipt of %s: %s: %s", v.rc.VoteID, g.Step, g.Message)
		case g.Disposition != v.disp:
			t.Fatalf("JavaScript: the receipt of %s: %s, Go found %s", v.rc.VoteID, g.Disposition, v.disp)
		case v.disp == receipt.Duplicate:
		case v.last && (g.Disposition != receipt.Counted || g.Vote.Option != v.option):
			t.Fatalf("JavaScript: %s's last vote for %s: %+v", v.voter, v.option, g)
		case !v.last && (g.Disposition != receipt.Superseded || g.Counted == nil || g.Counted.Option != lastOption(casts, v.voter)):
			t.Fatalf("JavaScript: %s's changed vote for %s: %+v", v.voter, v.option, g)
		}
	}
	t.Logf("the JavaScript client verified the %d receipts", len(casts))
}

// verifyWithTheCLI checks every receipt with tally receipt verify, each
// saved to a file and its proof fetched from an edge, eight at a time.
func verifyWithTheCLI(t *testing.T, tally string, c *upgradeCluster, casts []cast) {
	t.Helper()
	dir := t.TempDir()
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				v := casts[i]
				file := filepath.Join(dir, fmt.Sprintf("receipt-%d.json", i))
				b, _ := json.Marshal(v.rc)
				if err := os.WriteFile(file, b, 0o600); err != nil {
					t.Error(err)
					continue
				}
				out, err := exec.Command(tally, "receipt", "verify", "--url", c.edges[i%len(c.edges)].url(), file).CombinedOutput()
				want := "is in the certified result"
				switch {
				case v.disp == receipt.Duplicate:
					want = "taken first, stands in its place"
				case !v.last:
					want = "replaced by your later vote for " + lastOption(casts, v.voter)
				}
				if err != nil || !strings.Contains(string(out), want) {
					t.Errorf("tally receipt verify %s (%s's vote for %s): %v, want %q in:\n%s", v.rc.VoteID, v.voter, v.option, err, want, out)
				}
			}
		})
	}
	for i := range casts {
		work <- i
	}
	close(work)
	wg.Wait()
	if !t.Failed() {
		t.Logf("tally receipt verify verified the %d receipts", len(casts))
	}
}

// mergeGivesTheRoot exports every full node's records (tally ledger
// export) and merges them offline (tally ledger merge): the tree's size
// and root are the certificate's.
func mergeGivesTheRoot(t *testing.T, tally string, c *upgradeCluster, head *receipt.TreeHead) {
	t.Helper()
	dir := t.TempDir()
	args := []string{"ledger", "export", "--poll", "r", "-o", dir}
	for _, u := range c.procs {
		if !u.edge {
			args = append(args, "--url", u.url())
		}
	}
	cmd := exec.Command(tally, args...)
	cmd.Env = append(os.Environ(), "TALLY_TOKEN="+testToken)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tally %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.ndjson"))
	out, err := exec.Command(tally, append([]string{"ledger", "merge", "--json"}, files...)...).Output()
	if err != nil {
		t.Fatalf("tally ledger merge: %v\n%s", err, out)
	}
	var merged struct {
		Size uint64 `json:"tree_size"`
		Root string `json:"tree_root"`
	}
	if err := json.Unmarshal(out, &merged); err != nil || merged.Size != head.Size || merged.Root != head.Root {
		t.Fatalf("the offline merge's tree: %d records, root %s (%v); the certificate's: %d, %s", merged.Size, merged.Root, err, head.Size, head.Root)
	}
	t.Logf("tally ledger merge of the %d exports gives the certificate's tree: %d records, root %s", len(files), merged.Size, merged.Root)
}

// castVotes has n voters vote through the edges (voter i at edge i mod
// 3), every fifth voting again for another option through the next
// region's edge, after the first vote's stamp. Every acknowledged vote
// carries a receipt.
func castVotes(t *testing.T, c *upgradeCluster, n int) []cast {
	t.Helper()
	options := []string{"a", "b", "c"}
	var mu sync.Mutex
	var casts []cast
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := w; i < n; i += 6 {
				voter := fmt.Sprintf("voter-%03d", i)
				first := sendWithReceipt(t, c.edges[i%3].url(), voter, options[i%3], fmt.Sprintf("k-%03d-1", i), "")
				if first == nil {
					return
				}
				one := cast{voter: voter, option: options[i%3], last: true, rc: *first}
				var two *receipt.Receipt
				if i%5 == 0 {
					two = sendWithReceipt(t, c.edges[(i+1)%3].url(), voter, options[(i+1)%3], fmt.Sprintf("k-%03d-2", i), first.Stamp)
					if two == nil {
						return
					}
					one.last = false
				}
				mu.Lock()
				casts = append(casts, one)
				if two != nil {
					casts = append(casts, cast{voter: voter, option: options[(i+1)%3], last: true, rc: *two})
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return casts
}

// sendWithReceipt votes until acknowledged (503 and 504 are retried with
// the same key) and returns the answer's receipt; nil after a failure,
// reported.
func sendWithReceipt(t *testing.T, url, voter, option, idem, after string) *receipt.Receipt {
	body := fmt.Sprintf(`{"option":%q,"voter":%q,"idem":%q,"after":%q}`, option, voter, idem, after)
	deadline := time.Now().Add(time.Minute)
	for {
		code, b, err := post(url+"/v1/polls/r/votes", body)
		var res api.VoteResponse
		if err == nil && code == 200 && json.Unmarshal(b, &res) == nil && len(res.Results) == 1 {
			r := res.Results[0]
			if r.Status != api.StatusAccepted && r.Status != api.StatusDuplicate || r.Receipt == nil {
				t.Errorf("vote %s: %s", body, b)
				return nil
			}
			return r.Receipt
		}
		if code != 0 && code != 503 && code != 504 || time.Now().After(deadline) {
			t.Errorf("vote %s: %d %s %v", body, code, b, err)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lastOption is the option of the voter's last vote.
func lastOption(casts []cast, voter string) string {
	for _, v := range casts {
		if v.voter == voter && v.last {
			return v.option
		}
	}
	return ""
}

// clusterKeys reads GET /v1/cluster/keys as a receipt's checker does.
func clusterKeys(t *testing.T, url string) receipt.Keys {
	t.Helper()
	var ks api.ClusterKeys
	if code := getJSON(url+"/v1/cluster/keys", &ks); code != 200 {
		t.Fatalf("GET /v1/cluster/keys: %d", code)
	}
	m := map[string]ed25519.PublicKey{}
	for _, k := range ks.Keys {
		m[k.Replica] = k.PublicKey
	}
	return func(replica string) ed25519.PublicKey { return m[replica] }
}

// A node answers every accepted vote with its receipt, signed by its
// replica's key; with --no-receipts, without.
func TestNoReceiptsTurnsThemOff(t *testing.T) {
	t.Parallel()
	for _, off := range []bool{false, true} {
		tn := startNode(t, t.TempDir(), func(c *Config) { c.NoReceipts = off })
		tn.createPoll(t, "p")
		code, body, err := post(tn.url+"/v1/polls/p/votes", `{"option":"a","voter":"ann","idem":"ann-1"}`)
		var res api.VoteResponse
		if err != nil || code != 200 || json.Unmarshal(body, &res) != nil || len(res.Results) != 1 {
			t.Fatalf("vote: %d %s %v", code, body, err)
		}
		rc := res.Results[0].Receipt
		if off != (rc == nil) {
			t.Fatalf("--no-receipts %v: %s", off, body)
		}
		if rc != nil {
			if err := rc.Verify(clusterKeys(t, tn.url)(rc.Replica())); err != nil {
				t.Fatal(err)
			}
		}
	}
}
