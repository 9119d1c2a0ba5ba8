package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tally/certify"
	"tally/hlc"
)

// A poll nobody voted in is certified with total 0, and the node keeps
// serving and restarts on its data dir (it used to panic in Certify on a
// nil record-count map, and again at every restart).
func TestPollWithNoVotesCertifiesZero(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, nil)
	r := n.admin(t, "POST", "/v1/polls", `{"id":"empty","question":"Anyone?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":1,"grace_s":0}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	n.clock.advance(5 * time.Second)
	v := certifiedEverywhere(t, []*testNode{n}, "empty")
	if v.Total != 0 || v.Digest == "" {
		t.Fatalf("certified: %+v", v)
	}
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
	back := startNodeAt(t, dir, n.clock.ms.Load(), nil)
	if v := back.result(t, "empty"); v.Status != "reconciled" || v.Total != 0 {
		t.Fatalf("after restart: %+v", v)
	}
	if r := back.call(t, "GET", "/readyz", ""); r.status != http.StatusOK {
		t.Fatalf("readyz after restart: %d", r.status)
	}
}

// A panic inside one poll's certification stays with that poll: the node
// keeps serving, the failure is a pending certificate with its reason and
// a metric, other polls certify, and the poll certifies once the cause is
// gone.
func TestCertificationPanicIsContainedAndRetried(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	broken.Store(true)
	honest := &tamper{}
	fetch := func(ctx context.Context, p certify.Peer, poll string, after uint64, fence hlc.Timestamp) (io.ReadCloser, error) {
		if poll == "bad" && broken.Load() {
			panic("injected fault in the fetch of " + poll)
		}
		return honest.fetch(ctx, p, poll, after, fence)
	}
	nodes := startCluster(t, []string{"eu-west", "us-east"}, func(i int, c *Config) { c.Fetch = fetch })
	for _, id := range []string{"bad", "good"} {
		nodes[0].createPoll(t, id)
		havePoll(t, nodes, id)
		for i, n := range nodes {
			n.castVote(t, id, "a", fmt.Sprintf("v%d", i), fmt.Sprintf("%s-%d", id, i))
		}
	}
	agree(t, nodes, "bad", map[string]int64{"a": 2, "b": 0, "c": 0})
	agree(t, nodes, "good", map[string]int64{"a": 2, "b": 0, "c": 0})
	advanceAll(nodes, 80*time.Second)
	certifiedEverywhere(t, nodes, "good")
	waitFor(t, func() bool {
		for _, n := range nodes {
			if v := n.result(t, "bad"); v.Status == "pending" && strings.Contains(v.Reason, "internal error") {
				return true
			}
		}
		return false
	})
	for _, n := range nodes {
		if r := n.call(t, "GET", "/readyz", ""); r.status != http.StatusOK {
			t.Fatalf("%s not ready after a certification panic: %d", n.replica, r.status)
		}
	}
	if got := metricValue(t, nodes, "tally_certify_attempts_total", `outcome="pending"`); got < 1 {
		t.Fatalf("pending attempts counted: %v", got)
	}
	broken.Store(false)
	if v := certifiedEverywhere(t, nodes, "bad"); v.Total != 2 {
		t.Fatalf("after the fault: %+v", v)
	}
}

// metricValue sums a series over the nodes' /metrics, for lines holding label.
func metricValue(t testing.TB, nodes []*testNode, name, label string) float64 {
	t.Helper()
	var sum float64
	for _, n := range nodes {
		r := n.call(t, "GET", "/metrics", "")
		for line := range strings.Lines(r.raw) {
			if (strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ")) && strings.Contains(line, label) {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				sum += v
			}
		}
	}
	return sum
}

// A checkpoint that cannot be written is counted and retried; the node
// keeps serving, and a later checkpoint succeeds once the cause is gone.
func TestCheckpointFailureIsCountedAndRetried(t *testing.T) {
	dir := t.TempDir()
	block := filepath.Join(dir, checkpointFile)
	if err := os.MkdirAll(filepath.Join(block, "x"), 0o700); err != nil { // nothing can be renamed over it
		t.Fatal(err)
	}
	n := startNode(t, dir, func(c *Config) { c.CheckpointEvery = 20 * time.Millisecond })
	waitFor(t, func() bool { return metricValue(t, []*testNode{n}, "tally_checkpoint_failures_total", "") >= 2 })
	n.createPoll(t, "p")
	if s, _ := n.castVote(t, "p", "a", "v", "i"); s != "accepted" {
		t.Fatalf("vote while checkpoints fail: %s", s)
	}
	if err := os.RemoveAll(block); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		st, err := os.Stat(filepath.Join(dir, checkpointFile))
		return err == nil && st.Mode().IsRegular()
	})
}

// A node restarted within 0.2 s of a crash must not stamp the votes it acks
// ahead of the wall clock: a change of mind that the same client sends a
// moment later to another node (same wall clock) must order after it. The
// crash leaves the clock's saved mark up to a second ahead; the node waits
// it out before it serves.
func TestQuickRestartDoesNotStampAheadOfAChangeOfMind(t *testing.T) {
	realClock := func(c *Config) { c.Now = time.Now }
	createReal := func(n *testNode) {
		r := n.admin(t, "POST", "/v1/polls", `{"id":"p","question":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":600}`)
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.raw)
		}
	}
	dirA := t.TempDir()
	a := startNode(t, dirA, realClock)
	b := startNode(t, t.TempDir(), realClock)
	createReal(a)
	createReal(b)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	// What an unclean stop leaves: the mark saved one window ahead of the
	// newest stamp, taken a moment before the crash.
	mark := time.Now().UnixMilli() + 1000
	if err := os.WriteFile(filepath.Join(dirA, hlcFile), []byte(strconv.FormatInt(mark, 10)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a = startNode(t, dirA, realClock)
	for i := range 5 {
		voter := fmt.Sprintf("v%d", i)
		if s, _ := a.castVote(t, "p", "a", voter, voter+"-1"); s != "accepted" {
			t.Fatalf("first vote: %s", s)
		}
		time.Sleep(5 * time.Millisecond) // the client's think time, not a wait for a condition
		if s, _ := b.castVote(t, "p", "b", voter, voter+"-2"); s != "accepted" {
			t.Fatalf("change of mind: %s", s)
		}
	}
	stamps := func(n *testNode) map[string]hlc.Timestamp {
		out := map[string]hlc.Timestamp{}
		for r, err := range n.Ledger().Scan("p") {
			if err != nil {
				t.Fatal(err)
			}
			out[r.Voter] = hlc.Timestamp{Wall: r.Wall, Logical: r.Logical, Replica: r.Replica}
		}
		return out
	}
	first, second := stamps(a), stamps(b)
	for voter, ts := range first {
		if !ts.Less(second[voter]) {
			t.Errorf("%s: the acked vote at the restarted node is stamped %v, after the change of mind %v", voter, ts, second[voter])
		}
	}
}

// Times and rates out of their documented bounds are refused with a clear
// 400 and create nothing; a window at its bounds is accepted.
func TestPollTimesAndLimitsAreBounded(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	now := n.clock.ms.Load()
	opts := `"question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]`
	for name, body := range map[string]string{
		"closes_at max int64":   `{"id":"x1",` + opts + `,"closes_at":9223372036854775807}`,
		"closes_at in the past": fmt.Sprintf(`{"id":"x2",%s,"closes_at":%d}`, opts, now-1000),
		"opens_at min int64":    `{"id":"x3",` + opts + `,"opens_at":-9223372036854775808}`,
		"opens_at a year ahead": fmt.Sprintf(`{"id":"x4",%s,"opens_at":%d}`, opts, now+365*24*3600*1000),
		"duration over 7 days":  `{"id":"x5",` + opts + `,"duration_s":604801}`,
		"duration 1e308":        `{"id":"x6",` + opts + `,"duration_s":1e308}`,
		"grace 1e308":           `{"id":"x7",` + opts + `,"grace_s":1e308}`,
		"ip_rate 1e-300":        `{"id":"x8",` + opts + `,"limits":{"ip_rate":1e-300}}`,
		"voter_rate negative":   `{"id":"x9",` + opts + `,"limits":{"voter_rate":-5}}`,
	} {
		r := n.admin(t, "POST", "/v1/polls", body)
		if r.status != http.StatusBadRequest || r.code() != "invalid_request" {
			t.Errorf("%s: %d %s", name, r.status, r.raw)
		}
	}
	if r := n.call(t, "GET", "/v1/polls", ""); strings.Contains(r.raw, `"x`) {
		t.Fatalf("a refused poll was created: %s", r.raw)
	}
	r := n.admin(t, "POST", "/v1/polls", fmt.Sprintf(`{"id":"edge",%s,"opens_at":%d,"duration_s":604800,"grace_s":300,"limits":{"ip_rate":0.01}}`, opts, now+30*24*3600*1000))
	if r.status != http.StatusCreated || r.body["status"] != "scheduled" {
		t.Fatalf("a poll at its bounds: %d %s", r.status, r.raw)
	}
}

// GET /v1/polls is paginated, newest first, and a node holds a bounded
// number of polls: beyond it a create is refused with a clear 409.
func TestPollListPagesAndPollBound(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *Config) { c.MaxPolls = 7 })
	for i := range 7 {
		n.clock.advance(time.Second)
		n.createPoll(t, fmt.Sprintf("p%d", i))
	}
	r := n.admin(t, "POST", "/v1/polls", `{"id":"one-too-many","question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}]}`)
	if r.status != http.StatusConflict || r.code() != "too_many_polls" {
		t.Fatalf("create beyond the bound: %d %s", r.status, r.raw)
	}
	if r := n.admin(t, "POST", "/v1/polls/p3/close", ""); r.status != http.StatusOK {
		t.Fatalf("closing a poll at the bound: %d %s", r.status, r.raw)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		path := "/v1/polls?limit=3"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := n.call(t, "GET", path, "")
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", path, r.status, r.raw)
		}
		polls := r.body["polls"].([]any)
		if len(polls) > 3 {
			t.Fatalf("page of %d with limit 3", len(polls))
		}
		for _, p := range polls {
			got = append(got, p.(map[string]any)["id"].(string))
		}
		next, more := r.body["next_cursor"].(string)
		if !more {
			break
		}
		cursor = next
	}
	if want := []string{"p6", "p5", "p4", "p3", "p2", "p1", "p0"}; !slices.Equal(got, want) {
		t.Fatalf("pages: %v, want %v", got, want)
	}
	for _, bad := range []string{"limit=0", "limit=201", "limit=x", "cursor=%%%", "cursor=bm9wZQ", "cursor=" + strings.Repeat("QUFB", 100)} {
		if r := n.call(t, "GET", "/v1/polls?"+bad, ""); r.status != http.StatusBadRequest || r.code() != "invalid_request" {
			t.Errorf("%s: %d %s", bad, r.status, r.raw)
		}
	}
	if r := n.call(t, "GET", "/v1/polls", ""); len(r.body["polls"].([]any)) != 7 || r.body["next_cursor"] != nil {
		t.Fatalf("default page: %s", r.raw)
	}
}

// A poll certified and past grace plus --retention leaves memory on every
// node; it stays gone across a restart and while a peer with a longer
// retention still gossips it; its records stay in the ledger.
func TestPollLeavesMemoryAfterRetention(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, []string{"eu-west", "us-east"}, func(i int, c *Config) {
		c.ForgetEvery = 20 * time.Millisecond
		c.Retention = time.Second
		if i == 1 {
			c.Retention = 24 * time.Hour // still gossips the poll
		}
	})
	a, b := nodes[0], nodes[1]
	b.createPoll(t, "p")
	havePoll(t, nodes, "p")
	a.castVote(t, "p", "a", "v1", "k1")
	b.castVote(t, "p", "b", "v2", "k2")
	advanceAll(nodes, 65500*time.Millisecond) // past close (60 s) and grace (5 s), not retention (1 s more)
	certifiedEverywhere(t, nodes, "p")
	advanceAll(nodes, 2*time.Second) // past retention at a, not at b
	waitFor(t, func() bool { return a.call(t, "GET", "/v1/polls/p", "").status == http.StatusNotFound })
	if got := metricValue(t, []*testNode{a}, "tally_polls_forgotten_total", ""); got != 1 {
		t.Fatalf("forgotten: %v", got)
	}
	// b keeps refreshing the poll; a drops what it hears of it.
	dropped := func() float64 {
		return metricValue(t, []*testNode{a}, "tally_gossip_dropped_total", `reason="unknown_poll"`)
	}
	before := dropped()
	waitFor(t, func() bool { return dropped() >= before+2 })
	if r := a.call(t, "GET", "/v1/polls/p", ""); r.status != http.StatusNotFound {
		t.Fatalf("a forgotten poll came back by gossip: %d", r.status)
	}
	if r := b.call(t, "GET", "/v1/polls/p", ""); r.status != http.StatusOK {
		t.Fatalf("the peer with a longer retention lost the poll: %d", r.status)
	}
	// A restart does not bring it back either, and the records are kept.
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	back := startNodeAt(t, a.cfg.DataDir, a.clock.ms.Load(), func(c *Config) {
		c.Region, c.NodeName, c.Join, c.Retention, c.ForgetEvery = "eu-west", a.cfg.NodeName, []string{b.GossipAddr()}, time.Second, 20*time.Millisecond
	})
	if r := back.call(t, "GET", "/v1/polls/p", ""); r.status != http.StatusNotFound {
		t.Fatalf("after a restart: %d", r.status)
	}
	records := 0
	for _, err := range back.Ledger().Scan("p") {
		if err != nil {
			t.Fatal(err)
		}
		records++
	}
	if records != 1 {
		t.Fatalf("records of the forgotten poll in the ledger: %d", records)
	}
}

// Once reconciled, a poll's view carries the certified numbers, not the
// live counters: here the live tally still holds a replica that the
// certificate excludes.
func TestReconciledViewShowsCertifiedNumbers(t *testing.T) {
	nodes := startCluster(t, []string{"eu-west", "us-east"}, nil)
	a, b := nodes[0], nodes[1]
	a.createPoll(t, "p")
	havePoll(t, nodes, "p")
	a.castVote(t, "p", "a", "v1", "k1")
	b.castVote(t, "p", "b", "v2", "k2")
	agree(t, nodes, "p", map[string]int64{"a": 1, "b": 1, "c": 0})
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(a.gossip.Members()) == 1 })
	a.clock.advance(70 * time.Second)
	body := fmt.Sprintf(`{"exclude":[%q],"reason":"disk lost"}`, b.replica)
	if r := a.admin(t, "POST", "/v1/polls/p/certify", body); r.status != http.StatusOK {
		t.Fatalf("certify: %d %s", r.status, r.raw)
	}
	if got := a.totals(t, "p"); got["a"] != 1 || got["b"] != 0 || got["_total"] != 1 {
		t.Fatalf("reconciled view: %v", got)
	}
	r := a.call(t, "GET", "/v1/polls", "")
	if v := r.body["polls"].([]any)[0].(map[string]any); v["status"] != "reconciled" || v["total"].(float64) != 1 {
		t.Fatalf("list: %v", v)
	}
}

// Per-address limits group IPv6 clients by /64: ten addresses of one /64
// share one budget, where they used to get ten.
func TestIPv6AddressesShareTheirSlash64(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *Config) {
		c.TrustedProxies = mustCIDRs("127.0.0.1/32")
		c.Limits.IPRate, c.Limits.IPBurst = 1, 4
	})
	n.createPoll(t, "p")
	limited := 0
	for i := range 10 {
		r := n.call(t, "POST", "/v1/polls/p/votes", vote("a", fmt.Sprintf("v%d", i), fmt.Sprintf("k%d", i)),
			"X-Forwarded-For", fmt.Sprintf("2001:db8:1:2::%x", i+1))
		if r.status == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited != 6 {
		t.Fatalf("%d of 10 votes from one /64 limited, want 6 (burst 4)", limited)
	}
	// Another /64 has its own budget.
	r := n.call(t, "POST", "/v1/polls/p/votes", vote("a", "w", "kw"), "X-Forwarded-For", "2001:db8:1:3::1")
	if r.status != http.StatusOK {
		t.Fatalf("another /64: %d %s", r.status, r.raw)
	}
}
