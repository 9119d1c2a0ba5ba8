package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/api"
	"tally/internal/testwait"
)

// TestLostFullNodeCostsNothingVisible is issue 59's lost machine: in a
// region of two full nodes on two copies (and its edges, beside us-east),
// voters vote at one full node, which is then destroyed (SIGKILL, its
// data dir deleted) right after its last acknowledgement; then some of
// its voters change their minds in us-east. Its counters can no longer
// retract them, and the votes its own gossip never carried are only in
// its buddy's copies. It holds that, once the loss is known (the node is
// no longer a member), every node and edge shows the number the
// certificate will say — never more, and never less than the voters
// acknowledged — that a retry of each of its keys is answered duplicate
// with its own vote id at every node and edge, and that the poll then
// certifies to those same totals. It logs how long each took.
func TestLostFullNodeCostsNothingVisible(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	et := startEdgeTierCopies(t, 2)
	et.us.createPollFor(t, "p", 3600)
	et.seePoll(t, "p")

	const voters, changers = 60, 20
	// Six clients at once, the node destroyed the moment the last is
	// acknowledged: it may never have announced the poll's votes itself
	// (its delta goes out every 100 ms); its buddy holds them.
	ids := map[string]string{} // idem → vote id the destroyed node gave
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c := range 6 {
		wg.Go(func() {
			for v := c; v < voters; v += 6 {
				key := fmt.Sprintf("lost-%02d", v)
				code, body, err := post(et.full[0].url+"/v1/polls/p/votes", vote("a", key, key))
				var r api.VoteResponse
				if err != nil || code != 200 || json.Unmarshal(body, &r) != nil || r.Results[0].Status != "accepted" {
					t.Errorf("vote %s: %d %s %v", key, code, body, err)
					return
				}
				mu.Lock()
				ids[key] = r.Results[0].VoteID
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	destroyed := et.destroy(t, 0)
	lost := time.Now()
	testwait.For(t, 60*time.Second, "the destroyed node out of the membership", func() bool {
		for _, m := range et.us.gossip.Members() {
			if m.Replica == destroyed {
				return false
			}
		}
		return true
	})
	known := time.Now()
	t.Logf("the loss known %v after the destroy", known.Sub(lost).Round(time.Millisecond))
	for v := range changers {
		voter := fmt.Sprintf("lost-%02d", v)
		et.us.vote(t, "p", "b", voter)
	}
	want := map[string]int64{"a": voters - changers, "b": changers}

	// Every node and edge shows what the certificate will say; once one
	// shows every voter (the destroyed node's last votes may not have
	// reached it when it was lost), it never shows fewer. (A voter who
	// moves is counted at both replicas for a moment: the total may run
	// above, never below.)
	urls := []string{et.us.url, et.full[1].url, et.edges[0].url, et.edges[1].url}
	for _, u := range urls {
		reached := false
		testwait.For(t, 30*time.Second, "the live tally at "+u, func() bool {
			var v api.PollView
			if getJSON(u+"/v1/polls/p", &v) != 200 || v.Total == nil {
				return false
			}
			if reached && *v.Total < voters {
				t.Fatalf("%s showed every voter, then %d %v: the number on air fell", u, *v.Total, v.Totals)
			}
			reached = reached || *v.Total >= voters
			return v.Totals["a"] == want["a"] && v.Totals["b"] == want["b"]
		})
	}
	t.Logf("every node and edge live at the certificate's totals %v after the loss was known", time.Since(known).Round(time.Millisecond))

	// A retry of each of the destroyed node's keys: its own id, everywhere,
	// once its ballots have spread (a retry that races its key's ballot
	// to another region is a new vote there: docs/certification.md).
	testwait.For(t, 30*time.Second, "the destroyed node's ballots at us-east", func() bool {
		have, err := et.us.state.BallotsHave("p")
		return err == nil && have[destroyed] >= voters
	})
	t.Logf("its ballots all at us-east %v after the loss was known", time.Since(known).Round(time.Millisecond))
	for _, u := range urls {
		for key, id := range ids {
			code, body, err := post(u+"/v1/polls/p/votes", vote("a", key, key))
			var r api.VoteResponse
			if err != nil || code != 200 || json.Unmarshal(body, &r) != nil {
				t.Fatalf("retry of %s at %s: %d %s %v", key, u, code, body, err)
			}
			if got := r.Results[0]; got.Status != "duplicate" || got.VoteID != id {
				t.Fatalf("retry of %s at %s: %s %s, want duplicate %s", key, u, got.Status, got.VoteID, id)
			}
		}
	}

	closed := time.Now()
	if r := et.us.admin(t, "POST", "/v1/polls/p/close", ""); r.status != http.StatusOK {
		t.Fatal(r.raw)
	}
	var cert api.ResultView
	testwait.For(t, 60*time.Second, "the certificate", func() bool {
		return getJSON(et.us.url+"/v1/polls/p/result", &cert) == 200 && cert.Status == "reconciled"
	})
	t.Logf("certified %v after the close", time.Since(closed).Round(time.Millisecond))
	if cert.Totals["a"] != uint64(want["a"]) || cert.Totals["b"] != uint64(want["b"]) {
		t.Fatalf("certified %v, want %v", cert.Totals, want)
	}
	if !strings.Contains(fmt.Sprint(cert.Detail), destroyed) {
		t.Logf("certificate detail: %+v", cert.Detail)
	}
}
