package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/api"
	"tally/certify"
	"tally/internal/testwait"
)

// TestDestroyedNodeCertifiesFromItsCopy is issue 59's outside report as a
// process test: two full nodes in eu-west, one in us-east and an edge,
// every full node on --ack-copies 2; 600 votes, the last ones at the
// eu-west full node that coordinates the poll, which is destroyed (killed
// with SIGKILL, its data directory deleted) right after its last
// acknowledged vote; the poll is closed at once. Every surviving node and
// the edge must hold a reconciled certificate that counts every
// acknowledged vote, with no operator decision (the lost replica read from
// its buddy's copy), and answer a retry of any of the lost node's keys
// "duplicate" with the id of its record.
//
// It logs, per node, the time from close + grace to the certificate;
// timing never decides pass or fail (60 s is a deadline, not a target).
// It runs with the tests' gossip profile (local) and the default one
// (wan), whose failure detection takes 30 s and more.
func TestDestroyedNodeCertifiesFromItsCopy(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	for _, profile := range []string{"local", "wan"} {
		t.Run(profile, func(t *testing.T) {
			t.Parallel()
			runDestroyedCoordinator(t, profile)
		})
	}
}

// destroyCluster is the cluster of TestDestroyedNodeCertifiesFromItsCopy:
// full[0] and full[1] in eu-west, full[2] in us-east, an edge in eu-west;
// all processes.
type destroyCluster struct {
	bin      string
	full     []*procNode
	fullDirs []string
	edge     *procNode
}

func startDestroyCluster(t *testing.T, profile string) *destroyCluster {
	t.Helper()
	dc := &destroyCluster{bin: buildNodeBinary(t)}
	seed := freePort(t)
	common := func(name, region, gossipAddr string) []string {
		flags := []string{"--region", region, "--node-name", name, "--gossip-addr", gossipAddr,
			"--gossip-profile", profile, "--push-pull-interval", "500ms"}
		if gossipAddr != seed {
			flags = append(flags, "--join", seed)
		}
		return flags
	}
	// The seed, us-east, first: the others join it.
	dc.full, dc.fullDirs = make([]*procNode, 3), make([]string, 3)
	for _, i := range []int{2, 0, 1} {
		region, addr := "eu-west", freePort(t)
		if i == 2 {
			region, addr = "us-east", seed
		}
		flags := append(common(fmt.Sprintf("%s-full-%d-%s", region, i, profile), region, addr),
			"--nats-cluster-addr", "127.0.0.1:0", "--nats-gateway-addr", "127.0.0.1:0", "--nats-leaf-addr", "127.0.0.1:0", "--ack-copies", "2")
		dc.fullDirs[i] = t.TempDir()
		dc.full[i] = startProcessNoWait(t, dc.bin, dc.fullDirs[i], flags...)
	}
	dc.edge = startProcessNoWait(t, dc.bin, t.TempDir(), append(common("eu-west-edge-"+profile, "eu-west", freePort(t)), "--role", "edge")...)
	all := append(slices.Clone(dc.full), dc.edge)
	testwait.For(t, 60*time.Second, "every node ready and seeing four members", func() bool {
		for _, p := range all {
			var v api.ClusterView
			res, err := http.Get(p.url + "/readyz")
			if err != nil {
				return false
			}
			res.Body.Close()
			if res.StatusCode != 200 {
				return false
			}
			if res, err = http.Get(p.url + "/v1/cluster"); err != nil {
				return false
			}
			json.NewDecoder(res.Body).Decode(&v)
			res.Body.Close()
			if len(v.Members) != 4 {
				return false
			}
		}
		return true
	})
	return dc
}

func (dc *destroyCluster) replicaOf(t *testing.T, i int) string {
	t.Helper()
	id, err := os.ReadFile(filepath.Join(dc.fullDirs[i], "replica-id"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(id))
}

// ackedVote is a vote answered accepted, and its id.
type ackedVote struct{ body, id string }

func runDestroyedCoordinator(t *testing.T, profile string) {
	dc := startDestroyCluster(t, profile)
	replicas := []string{dc.replicaOf(t, 0), dc.replicaOf(t, 1), dc.replicaOf(t, 2)}
	// A poll whose coordinator is the node destroyed (full[0]): the worst
	// case, where the next in its order would wait its takeover slot.
	var poll string
	for i := 0; poll == ""; i++ {
		if id := fmt.Sprintf("d%d", i); certify.Order(id, replicas)[0] == replicas[0] {
			poll = id
		}
	}
	const grace = 2 // s
	if code, body, err := post(dc.full[2].url+"/v1/polls", fmt.Sprintf(`{"id":%q,"question":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"},{"id":"c","label":"C"}],"duration_s":3600,"grace_s":%d}`, poll, grace),
		"Authorization", "Bearer "+testToken); err != nil || code != http.StatusCreated {
		t.Fatalf("create poll: %d %s %v", code, body, err)
	}
	all := append(slices.Clone(dc.full), dc.edge)
	for _, p := range all {
		testwait.For(t, 20*time.Second, "the poll at every node", func() bool {
			res, err := http.Get(p.url + "/v1/polls/" + poll)
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode == 200
		})
	}

	// 600 votes, one per voter: 560 from eight clients at every node and
	// the edge, then the last 40 at the node to be destroyed.
	var mu sync.Mutex
	acked := map[string]ackedVote{} // key → its answer
	cast := func(url string, i int) {
		key, body := fmt.Sprintf("k%03d", i), vote(string(rune('a'+i%3)), fmt.Sprintf("v%03d", i), fmt.Sprintf("k%03d", i))
		for try := 0; try < 50; try++ {
			a := voteAt(url, poll, string(rune('a'+i%3)), fmt.Sprintf("v%03d", i), key)
			if a.code == http.StatusOK && (a.status == "accepted" || a.status == "duplicate") {
				mu.Lock()
				acked[key] = ackedVote{body, a.voteID}
				mu.Unlock()
				return
			}
			time.Sleep(20 * time.Millisecond) // a client's back-off before the same request again
		}
		t.Errorf("vote %s never acknowledged", key)
	}
	targets := []string{dc.full[0].url, dc.full[1].url, dc.full[2].url, dc.edge.url}
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := c; i < 560; i += 8 {
				cast(targets[i%len(targets)], i)
			}
		})
	}
	wg.Wait()
	for i := 560; i < 600; i++ {
		cast(dc.full[0].url, i)
	}
	// Destroyed right after its last acknowledged vote, and the poll
	// closed at once, at us-east.
	dc.full[0].cmd.Process.Kill()
	dc.full[0].cmd.Wait()
	destroyedLog := dc.full[0].log.String()
	if err := os.RemoveAll(dc.fullDirs[0]); err != nil {
		t.Fatal(err)
	}
	closeAt := time.Now()
	if code, body, err := post(dc.full[2].url+"/v1/polls/"+poll+"/close", "", "Authorization", "Bearer "+testToken); err != nil || code != http.StatusOK {
		t.Fatalf("close: %d %s %v", code, body, err)
	}
	// (Up to 1 s: the close waits that long for the destroyed node's
	// confirmation. closes_at is written first; the figures count from it.)
	t.Logf("%s profile: the close answered in %s", profile, time.Since(closeAt).Round(time.Millisecond))
	if len(acked) != 600 {
		t.Fatalf("%d votes acknowledged, want 600", len(acked))
	}

	// Each survivor's (and the edge's) first reconciled certificate.
	survivors := []*procNode{dc.full[1], dc.full[2], dc.edge}
	names := []string{"eu-west full (buddy)", "us-east full", "eu-west edge"}
	seen := make([]time.Time, len(survivors))
	certs := make([]api.ResultView, len(survivors))
	for i, p := range survivors {
		wg.Go(func() {
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) {
				var v api.ResultView
				if res, err := http.Get(p.url + "/v1/polls/" + poll + "/result"); err == nil {
					json.NewDecoder(res.Body).Decode(&v)
					res.Body.Close()
					if v.Status == "reconciled" {
						seen[i], certs[i] = time.Now(), v
						return
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	for i, p := range survivors {
		if seen[i].IsZero() {
			t.Logf("%s's log:\n%s", names[i], certifyLines(p.log.String()))
			t.Fatalf("%s: no reconciled certificate 60 s after the close", names[i])
		}
	}
	cert := certs[1]
	if cert.Detail == nil {
		t.Fatalf("certificate without detail: %+v", cert)
	}
	due := time.UnixMilli(cert.Detail.ClosesAt + grace*1000)
	var took []string
	for i := range survivors {
		took = append(took, fmt.Sprintf("%s %s", names[i], seen[i].Sub(due).Round(time.Millisecond)))
	}
	t.Logf("%s profile: from close + grace to a reconciled certificate: %s (certified by %s)", profile, strings.Join(took, ", "), cert.Detail.Coordinator)

	// Every acknowledged vote counts, the destroyed replica read from its copy.
	if cert.Total != 600 || len(cert.Detail.Excluded) > 0 || len(cert.Detail.Lost) > 0 {
		t.Errorf("certified %d (excluded %v, lost %v), want every one of the 600 acknowledged votes and no decision", cert.Total, cert.Detail.Excluded, cert.Detail.Lost)
	}
	if !slices.ContainsFunc(cert.Detail.FromCopy, func(c api.CopySource) bool { return c.Replica == replicas[0] }) {
		t.Errorf("from_copy %+v, want the destroyed replica %s", cert.Detail.FromCopy, replicas[0])
	}
	for i := range survivors {
		if certs[i].Digest != cert.Digest {
			t.Errorf("%s holds digest %s, us-east %s", names[i], certs[i].Digest, cert.Digest)
		}
	}

	// A retry of each of the lost node's keys, once the certificate is
	// at a node: duplicate, with its record's id, at every survivor and
	// the edge. A node applies the copied replica's ballots at its next
	// look after the certificate (certify's loop, every 100 ms): the
	// retries are sent again until every answer is right, for 10 s, and
	// how long that took after the certificate is logged. (A refusal
	// takes nothing: after the close, no retry is ledgered anew.)
	var lostKeys []string
	for key, a := range acked {
		if strings.HasPrefix(a.id, replicas[0]+"/") {
			lostKeys = append(lostKeys, key)
		}
	}
	slices.Sort(lostKeys)
	if len(lostKeys) < 40 {
		t.Fatalf("%d keys taken by the destroyed node, want at least its last 40", len(lostKeys))
	}
	retries := func(p *procNode) (wrong int, sample string) {
		for _, key := range lostKeys {
			a := acked[key]
			code, body, err := post(p.url+"/v1/polls/"+poll+"/votes", a.body)
			var res api.VoteResponse
			json.Unmarshal(body, &res)
			if err != nil || code != http.StatusOK || len(res.Results) != 1 || res.Results[0].Status != "duplicate" || res.Results[0].VoteID != a.id {
				if wrong++; wrong == 1 {
					sample = fmt.Sprintf("a retry of %s (acknowledged as %s): %d %s %v", key, a.id, code, strings.TrimSpace(string(body)), err)
				}
			}
		}
		return wrong, sample
	}
	var after []string
	for i, p := range survivors {
		first, sample := retries(p)
		wrong := first
		for wrong > 0 && time.Since(seen[i]) < 10*time.Second {
			time.Sleep(20 * time.Millisecond) // a client's back-off before the same requests again
			wrong, sample = retries(p)
		}
		if wrong > 0 {
			t.Errorf("%s: %d of the destroyed node's %d keys answered otherwise 10 s after the certificate, e.g. %s", names[i], wrong, len(lostKeys), sample)
			continue
		}
		after = append(after, fmt.Sprintf("%s all right %s after its certificate (%d wrong in the first pass)", names[i], time.Since(seen[i]).Round(time.Millisecond), first))
	}
	t.Logf("%s profile: retries of the destroyed node's %d keys, duplicate with its id: %s", profile, len(lostKeys), strings.Join(after, ", "))
	if t.Failed() {
		for i, p := range survivors[:2] {
			t.Logf("%s's certification log:\n%s", names[i], certifyLines(p.log.String()))
		}
		t.Logf("the destroyed node's certification log:\n%s", certifyLines(destroyedLog))
	}
}

// certifyLines is a node's log lines about certification and membership.
func certifyLines(log string) string {
	var out []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "certif") || strings.Contains(line, "memberlist") || strings.Contains(line, "member gone") {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	if len(out) > 60 {
		out = append(out[:30], append([]string{"…"}, out[len(out)-30:]...)...)
	}
	return strings.Join(out, "\n")
}
