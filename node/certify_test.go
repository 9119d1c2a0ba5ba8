package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"tally/api"
	"tally/certify"
	"tally/hlc"
	"tally/internal/testwait"
	"tally/ledger"
)

// advanceAll moves every node's clock.
func advanceAll(nodes []*testNode, d time.Duration) {
	for _, n := range nodes {
		n.clock.advance(d)
	}
}

// result reads a node's GET /v1/polls/{poll}/result.
func (tn *testNode) result(t testing.TB, poll string) api.ResultView {
	t.Helper()
	var v api.ResultView
	r := tn.call(t, "GET", "/v1/polls/"+poll+"/result", "")
	if err := json.Unmarshal([]byte(r.raw), &v); err != nil || r.status != http.StatusOK {
		t.Fatalf("result at %s: %d %s", tn.replica, r.status, r.raw)
	}
	return v
}

// certifiedEverywhere waits until every node serves a reconciled result
// and returns it (the same digest everywhere). A quiz question's result
// hidden at a node (403 result_hidden: the host's reveal has not reached
// it yet) is not there yet either.
func certifiedEverywhere(t testing.TB, nodes []*testNode, poll string) api.ResultView {
	t.Helper()
	var v api.ResultView
	waitFor(t, func() bool {
		for _, n := range nodes {
			if r := n.call(t, "GET", "/v1/polls/"+poll+"/result", ""); r.status == http.StatusForbidden && strings.Contains(r.raw, api.CodeResultHidden) {
				return false
			}
			if v = n.result(t, poll); v.Status != "reconciled" {
				return false
			}
		}
		return true
	})
	for _, n := range nodes {
		if d := n.result(t, poll).Digest; d != v.Digest {
			t.Fatalf("digests differ across regions: %s vs %s", d, v.Digest)
		}
	}
	return v
}

// exports fetches every node's records of the poll, as an auditor would.
func exports(t testing.TB, nodes []*testNode, poll string) [][]byte {
	var out [][]byte
	for _, n := range nodes {
		r := n.admin(t, "GET", "/v1/polls/"+poll+"/ledger", "")
		if r.status != http.StatusOK {
			t.Fatalf("export from %s: %d", n.replica, r.status)
		}
		out = append(out, []byte(r.raw))
	}
	return out
}

// TestCertifiedResultMatchesModel: votes in three regions, a voter who
// changes their mind in another region, a retry of one vote at another
// region, a late vote: the certified result equals a model computed from
// the acks, every region serves it, viewers get it as the final frame, and
// the digest reproduces offline from the exports.
func TestCertifiedResultMatchesModel(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, []string{"eu-west", "us-east", "ap-south"}, nil)
	nodes[0].createPoll(t, "p") // open 60 s, grace 5 s
	havePoll(t, nodes, "p")
	model := map[string]string{} // voter → option counted
	options := []string{"a", "b", "c"}
	for i := range 9 {
		voter := fmt.Sprintf("v%d", i)
		if s, _ := nodes[i%3].castVote(t, "p", options[i/3], voter, voter+"-1"); s != "accepted" {
			t.Fatalf("vote %s: %s", voter, s)
		}
		model[voter] = options[i/3]
	}
	// A change of mind in another region, once the first vote is known there.
	nodes[0].castVote(t, "p", "a", "mover", "mover-1")
	agree(t, nodes, "p", map[string]int64{"a": 4, "b": 3, "c": 3})
	nodes[1].castVote(t, "p", "b", "mover", "mover-2")
	model["mover"] = "b"
	// A retry of one vote that reached another region: that node has
	// usually not seen the key yet, so it ledgers it again and the exact
	// merge keeps the first; when the first's ballot got there first (a
	// loaded machine's timing), it answers duplicate and ledgers nothing.
	// Either way the retry counts once.
	nodes[0].castVote(t, "p", "c", "retrier", "retrier-1")
	nodes[2].castVote(t, "p", "c", "retrier", "retrier-1")
	model["retrier"] = "c"
	// A late vote: after the close, within grace.
	advanceAll(nodes, 61*time.Second)
	if s, _ := nodes[1].castVote(t, "p", "a", "latecomer", "late-1"); s != "late" {
		t.Fatalf("late vote acked %q", s)
	}
	// A viewer watches region 3 through the close.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(nodes[2].url, "http")+"/v1/polls/p/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if v := nodes[0].result(t, "p"); v.Status != "pending" || !strings.Contains(v.Reason, "grace") {
		t.Fatalf("result during grace: %+v", v)
	}

	advanceAll(nodes, 10*time.Second) // past grace and settle
	got := certifiedEverywhere(t, nodes, "p")
	want := map[string]uint64{}
	for _, o := range model {
		want[o]++
	}
	res := got.Detail.Result
	if !maps.Equal(got.Totals, want) || got.Total != uint64(len(model)) || res.Duplicates > 1 || res.Late != 1 ||
		res.Superseded != 1 || res.Records-res.Duplicates != 9+2+1+1 || res.Voters != uint64(len(model))+1 {
		t.Fatalf("certified %v total %d (dups %d, late %d, superseded %d, records %d, voters %d); model %v",
			got.Totals, got.Total, res.Duplicates, res.Late, res.Superseded, res.Records, res.Voters, want)
	}

	// The viewer's last word is the final frame with the certified totals.
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("no final frame: %v", err)
		}
		var m struct {
			Type, Status, Digest string
			Totals               map[string]int64
		}
		json.Unmarshal(data, &m)
		if m.Type == "final" {
			if m.Status != "reconciled" || m.Digest != got.Digest || m.Totals["b"] != int64(want["b"]) {
				t.Fatalf("final frame: %s", data)
			}
			break
		}
	}

	// An auditor reproduces the digest from the three exports.
	var streams []iter.Seq2[ledger.Record, error]
	for _, e := range exports(t, nodes, "p") {
		streams = append(streams, ledger.ReadNDJSON(bytes.NewReader(e)))
	}
	def, _ := nodes[0].state.Defs.Poll("p")
	offline, err := ledger.ReconcileWith(ledger.ReconcileConfig{ClosesAt: def.ClosesAt, CloseRule: ledger.CloseByNode}, streams...)
	if err != nil {
		t.Fatal(err)
	}
	if offline.Digest != got.Digest {
		t.Fatalf("offline digest %s, certified %s", offline.Digest, got.Digest)
	}
}

// TestCertificationPendingWhileAReplicaIsDown: a replica down at close
// leaves the result pending, naming it; when it is back, the poll is
// certified.
func TestCertificationPendingWhileAReplicaIsDown(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, []string{"eu-west", "us-east", "ap-south"}, nil)
	nodes[0].createPoll(t, "p")
	havePoll(t, nodes, "p")
	for i, n := range nodes {
		n.castVote(t, "p", "a", fmt.Sprintf("v%d", i), fmt.Sprintf("i%d", i))
	}
	agree(t, nodes, "p", map[string]int64{"a": 3, "b": 0, "c": 0})
	down := nodes[2]
	if err := down.stop(); err != nil {
		t.Fatal(err)
	}
	up := nodes[:2]
	waitFor(t, func() bool { return len(up[0].gossip.Members()) == 2 })
	advanceAll(up, 80*time.Second)
	waitFor(t, func() bool {
		v := up[0].result(t, "p")
		return v.Status == "pending" && strings.Contains(v.Reason, down.replica) && strings.Contains(v.Reason, "expected 1 records")
	})
	back := startNodeAt(t, down.cfg.DataDir, up[0].clock.ms.Load(), func(c *Config) {
		c.Region, c.Join, c.NodeName, c.PushPull = "ap-south", []string{up[0].GossipAddr()}, down.cfg.NodeName, 500*time.Millisecond
	})
	all := []*testNode{up[0], up[1], back}
	if v := certifiedEverywhere(t, all, "p"); v.Total != 3 || len(v.Detail.Result.Replicas) != 3 {
		t.Fatalf("certified: %+v", v)
	}
}

// tamper is a Fetcher over HTTP that can truncate or alter exports.
type tamper struct {
	mode atomic.Value // "", "truncate", "alter"
	hits atomic.Int64
}

func (tp *tamper) fetch(ctx context.Context, p certify.Peer, poll string, after uint64, fence hlc.Timestamp) (io.ReadCloser, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+p.HTTPAddr+"/v1/polls/"+poll+"/ledger", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	lines := bytes.SplitAfter(bytes.TrimRight(body, "\n"), []byte("\n"))
	if mode, _ := tp.mode.Load().(string); mode != "" && bytes.HasPrefix(lines[len(lines)-1], []byte(`{"signed_head":`)) {
		lines = lines[:len(lines)-1] // a tampered export cannot keep the node's signature
	}
	switch mode, _ := tp.mode.Load().(string); mode {
	case "truncate":
		tp.hits.Add(1)
		lines = lines[:len(lines)-1]
	case "alter":
		tp.hits.Add(1)
		for i := range lines { // the first record for a (the first line is the close)
			if bytes.Contains(lines[i], []byte(`"option":"a"`)) {
				lines[i] = bytes.Replace(lines[i], []byte(`"option":"a"`), []byte(`"option":"b"`), 1)
				break
			}
		}
	}
	return io.NopCloser(bytes.NewReader(bytes.Join(lines, nil))), nil
}

// TestCertificationRejectsTamperedExports: an export cut short or altered
// fails the count or the chain check, and the result stays pending; honest
// exports then certify.
func TestCertificationRejectsTamperedExports(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"truncate", "alter"} {
		t.Run(mode, func(t *testing.T) {
			tp := &tamper{}
			tp.mode.Store(mode)
			nodes := startCluster(t, []string{"eu-west", "us-east"}, func(i int, c *Config) { c.Fetch = tp.fetch })
			nodes[0].createPoll(t, "p")
			havePoll(t, nodes, "p")
			for i, n := range nodes {
				for k := range 3 {
					n.castVote(t, "p", "a", fmt.Sprintf("v%d-%d", i, k), fmt.Sprintf("i%d-%d", i, k))
				}
			}
			agree(t, nodes, "p", map[string]int64{"a": 6, "b": 0, "c": 0})
			advanceAll(nodes, 80*time.Second)
			want := map[string]string{"truncate": "expected 3 records, received 2", "alter": "hash does not match"}[mode]
			waitFor(t, func() bool {
				v := nodes[0].result(t, "p")
				return v.Status == "pending" && strings.Contains(v.Reason, want)
			})
			tp.mode.Store("")
			if got := certifiedEverywhere(t, nodes, "p"); got.Total != 6 {
				t.Fatalf("certified after honest exports: %+v", got)
			}
		})
	}
}

// TestCoordinatorTakeover: the coordinator is killed while it collects
// the ledgers; another node takes over (its pending certificate names the
// missing replica); when the replica is back the poll is certified once,
// with one digest everywhere.
func TestCoordinatorTakeover(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		blocked = make(chan struct{}, 1)
		coord   string // node name whose fetches hang
	)
	hang := func(name string) certify.Fetcher {
		tp := &tamper{}
		return func(ctx context.Context, p certify.Peer, poll string, after uint64, fence hlc.Timestamp) (io.ReadCloser, error) {
			mu.Lock()
			me := coord == name
			mu.Unlock()
			if me {
				select {
				case blocked <- struct{}{}:
				default:
				}
				<-ctx.Done() // mid-certification until killed
				return nil, ctx.Err()
			}
			return tp.fetch(ctx, p, poll, after, fence)
		}
	}
	names := []string{"coord-a", "coord-b", "coord-c"}
	nodes := startCluster(t, []string{"eu-west", "us-east", "ap-south"}, func(i int, c *Config) {
		c.NodeName, c.Fetch, c.TakeoverAfter = names[i], hang(names[i]), 2*time.Second
	})
	nodes[0].createPoll(t, "p")
	havePoll(t, nodes, "p")
	for i, n := range nodes {
		n.castVote(t, "p", "b", fmt.Sprintf("v%d", i), fmt.Sprintf("i%d", i))
	}
	agree(t, nodes, "p", map[string]int64{"a": 0, "b": 3, "c": 0})
	order := certify.Order("p", []string{nodes[0].replica, nodes[1].replica, nodes[2].replica})
	var first *testNode
	for i, n := range nodes {
		if n.replica == order[0] {
			first = n
			mu.Lock()
			coord = names[i]
			mu.Unlock()
		}
	}
	advanceAll(nodes, 80*time.Second)
	<-blocked // the coordinator is collecting; the others wait their takeover delay
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	var rest []*testNode
	for _, n := range nodes {
		if n != first {
			rest = append(rest, n)
		}
	}
	waitFor(t, func() bool {
		v := rest[0].result(t, "p")
		return v.Status == "pending" && v.CertifiedBy != first.replica && strings.Contains(v.Reason, first.replica)
	})
	mu.Lock()
	coord = "" // the restarted node collects normally
	mu.Unlock()
	back := startNodeAt(t, first.cfg.DataDir, rest[0].clock.ms.Load(), func(c *Config) {
		c.Region, c.Join, c.NodeName, c.PushPull = first.cfg.Region, []string{rest[0].GossipAddr()}, first.cfg.NodeName, 500*time.Millisecond
		c.Fetch, c.TakeoverAfter = first.cfg.Fetch, 2*time.Second
	})
	got := certifiedEverywhere(t, append(rest, back), "p")
	if got.Total != 3 {
		t.Fatalf("certified: %+v", got)
	}
}

// TestCertifyEndpointRefusesBadInput: hostile and malformed requests to
// the certify and result endpoints get clear errors and change nothing.
func TestCertifyEndpointRefusesBadInput(t *testing.T) {
	tn := startNode(t, t.TempDir(), nil)
	tn.createPoll(t, "p")
	cases := []struct {
		name, path, body string
		admin            bool
		status           int
		code             string
	}{
		{"no token", "/v1/polls/p/certify", `{}`, false, 401, "unauthorized"},
		{"unknown poll", "/v1/polls/nope/certify", `{}`, true, 404, "poll_not_found"},
		{"open poll", "/v1/polls/p/certify", `{}`, true, 409, "poll_not_closed"},
		{"not json", "/v1/polls/p/certify", `{"exclude":`, true, 400, "invalid_request"},
		{"unknown field", "/v1/polls/p/certify", `{"exclude":[],"force":true}`, true, 400, "invalid_request"},
		{"bad replica id", "/v1/polls/p/certify", `{"exclude":["../etc"],"reason":"x"}`, true, 400, "invalid_request"},
		{"exclude without reason", "/v1/polls/p/certify", `{"exclude":["eu-1"]}`, true, 400, "invalid_request"},
		{"accept_lost without reason", "/v1/polls/p/certify", `{"accept_lost":["eu-1"]}`, true, 400, "invalid_request"},
		{"accept_lost bad replica id", "/v1/polls/p/certify", `{"accept_lost":["a/b"],"reason":"x"}`, true, 400, "invalid_request"},
		{"both exclude and accept_lost", "/v1/polls/p/certify", `{"exclude":["eu-1"],"accept_lost":["eu-1"],"reason":"x"}`, true, 400, "invalid_request"},
		{"accept_lost not a list", "/v1/polls/p/certify", `{"accept_lost":"eu-1","reason":"x"}`, true, 400, "invalid_request"},
		{"control chars in reason", "/v1/polls/p/certify", `{"exclude":["eu-1"],"reason":"a\u0000b"}`, true, 400, "invalid_request"},
		{"huge body", "/v1/polls/p/certify", `{"reason":"` + strings.Repeat("x", 20000) + `"}`, true, 413, "too_large"},
	}
	for _, c := range cases {
		var r response
		if c.admin {
			r = tn.admin(t, "POST", c.path, c.body)
		} else {
			r = tn.call(t, "POST", c.path, c.body)
		}
		if r.status != c.status || r.code() != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.raw, c.status, c.code)
		}
	}
	if _, ok := tn.state.Defs.Certificate("p"); ok {
		t.Fatal("a refused request wrote a certificate")
	}
	if r := tn.call(t, "GET", "/v1/polls/nope/result", ""); r.status != 404 || r.code() != "poll_not_found" {
		t.Fatalf("result of an unknown poll: %d %s", r.status, r.raw)
	}
	if v := tn.result(t, "p"); v.Status != "pending" || v.Reason != "the poll is not closed" {
		t.Fatalf("result of an open poll: %+v", v)
	}
}

// TestSkewedClocksAgreeOnWhichVotesAreIn: three regions whose clocks
// differ by up to ±2 s (the HLC refuses remote times more than 5 s ahead)
// take votes around the close. Each node decides at ingest by its HLC
// stamp (accepted before closes_at, late after), the certified result
// applies the same rule to the stamps in the ledgers, and every region
// serves the same result: what was acked "accepted" is exactly what counts.
func TestSkewedClocksAgreeOnWhichVotesAreIn(t *testing.T) {
	t.Parallel()
	offsets := []time.Duration{0, 2 * time.Second, -2 * time.Second}
	nodes := startCluster(t, []string{"eu-west", "us-east", "ap-south"}, nil)
	for i, n := range nodes {
		n.clock.advance(offsets[i])
	}
	nodes[0].createPoll(t, "p") // closes 60 s after eu-west's now, grace 5 s
	havePoll(t, nodes, "p")
	accepted := map[string]string{} // voter → option acked "accepted"
	late := 0
	step := 0
	for _, at := range []time.Duration{57 * time.Second, 900 * time.Millisecond, 900 * time.Millisecond, 900 * time.Millisecond, 900 * time.Millisecond} {
		advanceAll(nodes, at)
		for i, n := range nodes {
			voter := fmt.Sprintf("v%d-%d", step, i)
			option := []string{"a", "b", "c"}[(step+i)%3]
			switch s, _ := n.castVote(t, "p", option, voter, voter); s {
			case "accepted":
				accepted[voter] = option
			case "late":
				late++
			default:
				t.Fatalf("vote at %s: %s", n.replica, s)
			}
		}
		step++
	}
	if len(accepted) == 0 || late == 0 {
		t.Fatalf("the schedule should straddle the close: %d accepted, %d late", len(accepted), late)
	}
	advanceAll(nodes, 10*time.Second)
	got := certifiedEverywhere(t, nodes, "p")
	want := map[string]uint64{}
	for _, o := range accepted {
		want[o]++
	}
	if !maps.Equal(got.Totals, want) || got.Detail.Result.Late != uint64(late) {
		t.Fatalf("certified %v (late %d); acked accepted %v (late %d)", got.Totals, got.Detail.Result.Late, want, late)
	}
}

// TestRestartedFirstNodeCertifiesNothingAlone is issue 44 in process,
// deterministically: the cluster's first node (no --join) comes back while
// the other region is still down. It knows that region holds records
// before anyone answers it, shows the counts it showed, is not ready, and
// will not certify from its own replica; once the other region is back,
// the poll certifies with every vote.
func TestRestartedFirstNodeCertifiesNothingAlone(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, []string{"eu-west", "us-east"}, nil)
	first, other := nodes[0], nodes[1]
	first.createPoll(t, "p") // open 60 s, grace 5 s
	havePoll(t, nodes, "p")
	for i := range 4 {
		voter := fmt.Sprintf("v%d", i)
		nodes[i%2].castVote(t, "p", "a", voter, voter)
	}
	agree(t, nodes, "p", map[string]int64{"a": 4, "b": 0, "c": 0})
	for _, n := range []*testNode{other, first} {
		if err := n.stop(); err != nil {
			t.Fatal(err)
		}
	}

	now := first.clock.ms.Load()
	back := startNodeAt(t, first.cfg.DataDir, now, func(c *Config) {
		c.Region, c.NodeName, c.PushPull, c.CatchUpWait = "eu-west", first.cfg.NodeName, 500*time.Millisecond, time.Minute
	})
	if got := back.totals(t, "p"); got["_total"] != 4 {
		t.Fatalf("the restarted first node shows %v on air, 4 before", got)
	}
	if known, _ := back.state.KnownRecords("p"); known[other.replica] != 2 {
		t.Fatalf("the restarted first node knows %v of the other region's records", known)
	}
	if r := back.call(t, "GET", "/readyz", ""); r.status != http.StatusServiceUnavailable {
		t.Fatalf("ready before hearing from the replicas it knows: %d %s", r.status, r.raw)
	}
	if back.mayCertify() || slices.Contains(back.gossip.Unheard(), back.replica) || !slices.Contains(back.gossip.Unheard(), other.replica) {
		t.Fatalf("may certify %v; unheard %v", back.mayCertify(), back.gossip.Unheard())
	}
	// Past the grace, even an attempt made by hand writes pending, naming
	// the replica it cannot read.
	back.clock.advance(80 * time.Second)
	_, err := back.certify.Certify(context.Background(), "p", certify.Decisions{})
	if v := back.result(t, "p"); !errors.Is(err, certify.ErrIncomplete) || v.Status != "pending" ||
		!strings.Contains(v.Reason, other.replica) || !strings.Contains(v.Reason, "expected 2 records") {
		t.Fatalf("certified alone: %v; result %+v", err, v)
	}

	again := startNodeAt(t, other.cfg.DataDir, back.clock.ms.Load(), func(c *Config) {
		c.Region, c.NodeName, c.PushPull, c.Join = "us-east", other.cfg.NodeName, 500*time.Millisecond, []string{back.GossipAddr()}
	})
	if v := certifiedEverywhere(t, []*testNode{back, again}, "p"); v.Total != 4 {
		t.Fatalf("certified %d votes, 4 acknowledged", v.Total)
	}
}

// TestHeldShortCertificateIsWithdrawn: a reconciled certificate a node
// holds that leaves out records it knows of — written by an earlier
// version from a partial view, before the check existed — does not stand
// for good. The node withdraws it and certifies again; the other region
// never applies it.
func TestHeldShortCertificateIsWithdrawn(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, []string{"eu-west", "us-east"}, nil)
	first, other := nodes[0], nodes[1]
	first.createPoll(t, "p")
	havePoll(t, nodes, "p")
	for i := range 4 {
		voter := fmt.Sprintf("v%d", i)
		nodes[i%2].castVote(t, "p", "a", voter, voter)
	}
	agree(t, nodes, "p", map[string]int64{"a": 4, "b": 0, "c": 0})
	raw, _ := json.Marshal(api.ResultDetail{Coordinator: first.cfg.NodeName,
		Result: &ledger.Result{Poll: "p", Totals: map[string]uint64{"a": 2}, Total: 2, Digest: "short",
			Replicas: []ledger.Chain{{Poll: "p", Replica: first.replica, Records: 2}}}})
	ts, _ := first.Node.clock.Now()
	short := ledger.Certificate{Poll: "p", Status: ledger.Reconciled, TS: ts, By: first.replica, Totals: map[string]uint64{"a": 2}, Total: 2, Digest: "short", Detail: raw}
	if ok, err := first.state.Defs.PutCertificate(short); !ok || err != nil {
		t.Fatalf("held a short certificate: %v %v", ok, err)
	}
	advanceAll(nodes, 80*time.Second) // past the close and the grace
	testwait.For(t, 30*time.Second, "the short certificate withdrawn and the poll certified again", func() bool {
		for _, n := range nodes {
			if v := n.result(t, "p"); v.Status != "reconciled" || v.Total != 4 {
				return false
			}
		}
		return true
	})
	if got := metricValue(t, []*testNode{first}, "tally_certify_attempts_total", `outcome="withdrawn"`); got < 1 {
		t.Fatalf("withdrawals counted: %v", got)
	}
	if v := other.result(t, "p"); v.Digest == "short" {
		t.Fatal("the other region applied the short certificate")
	}
}
