package node

import (
	"bytes"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"tally/internal/testwait"
	"tally/ledger"
)

// TestTwoCopiesSurviveAFrozenBuddyAndADestroyedNode is the two-copy rule
// in processes (issue 48): two full nodes of eu-west, each the other's
// buddy, and one of us-east, every one on --ack-copies 2; votes through
// both edges and directly to the first eu-west full node (eu-full-0).
// Its buddy, eu-full-1, freezes (SIGSTOP) while votes flow: the copies
// that wait on it time out, the next buddy (us-east) takes them, first
// sent the whole chain, and votes go on being acknowledged; it resumes.
// Then eu-full-0 is killed with SIGKILL and its data directory deleted,
// never to return: eu-full-1, its buddy destroyed, copies to the next one
// and keeps acknowledging the edges' votes. The poll closes and is
// certified exact, every acknowledged vote in it, without --accept-lost,
// eu-full-0's chain read from its buddy's copy (the certificate says so),
// and an auditor reproduces the digest from the exports and the copy's.
func TestTwoCopiesSurviveAFrozenBuddyAndADestroyedNode(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	et := startEdgeTierCopies(t, 2)
	if r := et.us.admin(t, "POST", "/v1/polls", `{"id":"p","question":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"},{"id":"c","label":"C"}],"duration_s":3600}`); r.status != http.StatusCreated {
		t.Fatalf("create poll: %d %s", r.status, r.raw)
	}
	et.seePoll(t, "p")

	var doomed atomic.Value // the replica id of eu-full-0, from its vote ids
	load := startVoteLoad(t, []string{et.edges[0].url, et.edges[1].url, et.full[0].url, et.full[0].url}, func(url string, a voteAnswer) {
		if url == et.full[0].url {
			doomed.Store(a.voteID[:strings.LastIndexByte(a.voteID, '/')])
		}
	})
	defer func() {
		if t.Failed() {
			for i, p := range et.full {
				l := p.log.String()
				t.Logf("eu-full-%d's log, the end:\n%s", i, l[max(0, len(l)-3000):])
			}
		}
	}()
	more := func(what string, n int64) {
		t.Helper()
		before, since := load.acked.Load(), time.Now()
		testwait.For(t, 90*time.Second, what, func() bool { return load.acked.Load() >= before+n && doomed.Load() != nil })
		t.Logf("%s: %d more acknowledged in %s", what, n, time.Since(since).Round(time.Millisecond))
	}
	more("before the faults", 300)
	et.full[1].cmd.Process.Signal(syscall.SIGSTOP)
	more("eu-full-1 frozen", 150)
	et.full[1].cmd.Process.Signal(syscall.SIGCONT)
	waitFor(t, func() bool {
		res, err := http.Get(et.full[1].url + "/readyz")
		if err == nil {
			res.Body.Close()
		}
		return err == nil && res.StatusCode == http.StatusOK
	})
	more("eu-full-1 resumed", 150)
	et.full[0].cmd.Process.Kill()
	et.full[0].cmd.Wait()
	if err := os.RemoveAll(et.fullDirs[0]); err != nil {
		t.Fatal(err)
	}
	more("eu-full-0 destroyed", 150)
	load.stop()

	if r := et.us.admin(t, "POST", "/v1/polls/p/close", ""); r.status != http.StatusOK {
		t.Fatal(r.raw)
	}
	var r response
	testwait.For(t, 90*time.Second, "the poll certified", func() bool {
		r = et.us.call(t, "GET", "/v1/polls/p/result", "")
		return r.body["status"] == "reconciled"
	})
	total := int64(r.body["total"].(float64))
	if total < load.acked.Load() || total > load.acked.Load()+load.failed.Load() {
		t.Fatalf("certified %d votes: %s", total, load)
	}
	if !strings.Contains(r.raw, `"from_copy":[{"replica":"`+doomed.Load().(string)+`"`) {
		t.Fatalf("the certificate does not say %s was read from a copy: %s", doomed.Load(), r.raw)
	}
	auditFromCopy(t, et, r, doomed.Load().(string))
	t.Logf("certified %d votes: %s", total, load)
}

// auditFromCopy reproduces the certified digest as an auditor does, from
// the live nodes' exports and the surviving buddy's export of the
// destroyed replica's copy (docs/certification.md, "From a copy").
func auditFromCopy(t *testing.T, et *edgeTier, r response, doomed string) {
	t.Helper()
	var cert struct {
		Detail struct {
			FromCopy []struct{ Replica, Holder string } `json:"from_copy"`
		}
	}
	json.Unmarshal([]byte(r.raw), &cert)
	holder := et.full[1].url // the copy's holder: eu-full-1, or us-east if eu-full-0 copied there last
	if fc := cert.Detail.FromCopy; len(fc) == 1 && fc[0].Holder == et.us.replica {
		holder = et.us.url
	}
	var streams []iter.Seq2[ledger.Record, error]
	for _, u := range []string{et.us.url + "/v1/polls/p/ledger", et.full[1].url + "/v1/polls/p/ledger",
		holder + "/v1/polls/p/ledger?copy_of=" + doomed} {
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", u, res.StatusCode, b)
		}
		streams = append(streams, ledger.ReadNDJSON(bytes.NewReader(b)))
	}
	def, _ := et.us.state.Defs.Poll("p")
	floor := 0.0 // the processes' --trust-floor; the auditor uses the certifier's (tally ledger merge --trust-floor)
	if d, _ := r.body["detail"].(map[string]any); d != nil && d["coordinator"] == et.us.cfg.NodeName {
		floor = et.us.cfg.TrustFloor
	}
	offline, err := ledger.ReconcileWith(ledger.ReconcileConfig{Poll: "p", ClosesAt: def.ClosesAt, TrustFloor: floor}, streams...)
	if err != nil {
		t.Fatal(err)
	}
	if digest, _ := r.body["digest"].(string); offline.Digest != digest || digest == "" {
		t.Fatalf("the exports and the copy reconcile to digest %s, the certificate says %q", offline.Digest, digest)
	}
}
