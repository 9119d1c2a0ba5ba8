package node

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/certify"
	"tally/internal/testwait"
)

// TestReplacementOnAnEmptyDisk is issue 59's replacement: a full node
// that certified a poll and holds votes of an open one is destroyed, and
// a replacement starts under its name on an empty data dir. The
// replacement never met the replica it replaces: it learns that replica's
// key from the members and shows its certificate reconciled (not pending
// on an unknown signature), and it is ready once it holds the others'
// ballots — the gone replica's from its buddy — not after waiting out
// --catch-up-wait (set long here so that a wait would show).
func TestReplacementOnAnEmptyDisk(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	et := startEdgeTierCopies(t, 2)
	victim := et.replicaOf(t, 0)
	replicas := []string{et.us.replica, victim, et.replicaOf(t, 1)}
	// A poll the victim coordinates while every full node is up.
	certified := ""
	for i := range 100 {
		if id := fmt.Sprintf("c%d", i); certify.Order(id, replicas)[0] == victim {
			certified = id
			break
		}
	}
	et.us.createPollFor(t, certified, 3600)
	et.us.createPollFor(t, "open", 3600)
	et.seePoll(t, certified)
	et.seePoll(t, "open")
	for v := range 10 {
		for _, poll := range []string{certified, "open"} {
			key := fmt.Sprintf("%s-%d", poll, v)
			if code, body, err := post(et.full[0].url+"/v1/polls/"+poll+"/votes", vote("a", key, key)); err != nil || code != 200 || !strings.Contains(string(body), `"accepted"`) {
				t.Fatalf("vote %s: %d %s %v", key, code, body, err)
			}
		}
	}
	if r := et.us.admin(t, "POST", "/v1/polls/"+certified+"/close", ""); r.status != http.StatusOK {
		t.Fatal(r.raw)
	}
	var res api.ResultView
	testwait.For(t, 60*time.Second, "the certificate at us-east", func() bool {
		return getJSON(et.us.url+"/v1/polls/"+certified+"/result", &res) == 200 && res.Status == "reconciled"
	})
	if res.CertifiedBy != victim {
		t.Logf("certified by %s, not the victim %s (it was late): the key check below still runs", res.CertifiedBy, victim)
	}
	testwait.For(t, 30*time.Second, "the certificate at the victim's buddy", func() bool {
		var r api.ResultView
		return getJSON(et.full[1].url+"/v1/polls/"+certified+"/result", &r) == 200 && r.Status == "reconciled"
	})

	et.destroy(t, 0)
	testwait.For(t, 60*time.Second, "the victim out of the membership", func() bool {
		for _, m := range et.us.gossip.Members() {
			if m.Replica == victim {
				return false
			}
		}
		return true
	})
	start := time.Now()
	et.full[0] = startProcessNoWait(t, et.bin, et.fullDirs[0], append(et.fullFlags[0], "--catch-up-wait", "10m")...)
	testwait.For(t, 60*time.Second, "the replacement ready", func() bool {
		return getJSON(et.full[0].url+"/readyz", &struct{}{}) == 200
	})
	t.Logf("the replacement was ready %v after its start", time.Since(start).Round(time.Millisecond))
	// Said loudly, at the replacement and at the member that knew the old one.
	if !strings.Contains(et.full[0].log.String(), "starts on an empty data dir") {
		t.Errorf("the replacement did not say it starts on an empty data dir:\n%s", et.full[0].log.String())
	}
	testwait.For(t, 30*time.Second, "the buddy's log naming the replaced replica", func() bool {
		l := et.full[1].log.String()
		return strings.Contains(l, "is back under a known name as a new replica") && strings.Contains(l, victim)
	})
	testwait.For(t, 30*time.Second, "the certificate at the replacement", func() bool {
		var r api.ResultView
		return getJSON(et.full[0].url+"/v1/polls/"+certified+"/result", &r) == 200 && r.Status == "reconciled" && r.Digest == res.Digest
	})
	t.Logf("the certificate reconciled at the replacement %v after its start", time.Since(start).Round(time.Millisecond))
	var keys api.ClusterKeys
	if getJSON(et.full[0].url+"/v1/cluster/keys", &keys) != 200 {
		t.Fatal("GET /v1/cluster/keys")
	}
	found := false
	for _, k := range keys.Keys {
		found = found || k.Replica == res.CertifiedBy
	}
	if !found {
		t.Fatalf("the replacement does not know the certifier %s's key: %+v", res.CertifiedBy, keys.Keys)
	}
	// The open poll's votes of the gone replica: its keys are known.
	key := "open-3"
	code, body, err := post(et.full[0].url+"/v1/polls/open/votes", vote("a", key, key))
	if err != nil || code != 200 || !strings.Contains(string(body), `"duplicate"`) || !strings.Contains(string(body), victim) {
		t.Fatalf("a retry of the gone replica's key at the replacement: %d %s %v", code, body, err)
	}
}
