package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"tally/api"
	"tally/crdt"
	"tally/hlc"
	"tally/internal/testwait"
	"tally/ledger"
	"tally/poll"
	"tally/state"
)

// TestOnAirNeverFallsAfterKill9 is issue 59 at process level: a node
// shows a total T, is killed with SIGKILL at once and restarted on its
// data dir; from the first moment its port answers, every total it
// serves — GET /v1/polls/{poll}, GET /v1/polls and the live stream's
// first frame — is at least T (a 503 is no number on air). Alone, and as
// the seed of a two-region cluster whose other node takes the votes after
// the first round (so T came by gossip, and only the kept tally or the
// peer can give it back): with the peer up, and in odd rounds with the
// peer killed too and started again only once the seed is back up to its
// start's end (so the seed, meanwhile, has its kept tally alone).
func TestOnAirNeverFallsAfterKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs node binaries")
	}
	bin := buildNodeBinary(t)
	t.Run("single", func(t *testing.T) {
		dir := t.TempDir()
		p := startProcess(t, bin, dir)
		createOnAirPoll(t, p.url)
		var want int64
		for round := range 3 {
			want += 30
			sendVotes(t, p.url, fmt.Sprintf("s%d", round), 30)
			p = killShownRestart(t, bin, dir, nil, p, want, round, nil, nil)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		seedDir, seed := t.TempDir(), freePort(t)
		common := []string{"--gossip-profile", "local", "--push-pull-interval", "500ms",
			"--nats-cluster-addr", "127.0.0.1:0", "--nats-gateway-addr", "127.0.0.1:0", "--nats-leaf-addr", "127.0.0.1:0"}
		// --catch-up-wait at its longest: the seed's start waits for its
		// peer however long the peer takes (no clock decides the test).
		seedFlags := append([]string{"--region", "eu-west", "--node-name", "onair-a", "--gossip-addr", seed, "--catch-up-wait", "10m"}, common...)
		peerDir, peerFlags := t.TempDir(), append([]string{"--region", "us-east", "--node-name", "onair-b", "--gossip-addr", freePort(t), "--join", seed}, common...)
		a := startProcess(t, bin, seedDir, seedFlags...)
		b := startProcess(t, bin, peerDir, peerFlags...)
		createOnAirPoll(t, a.url)
		testwait.For(t, 30*time.Second, "b holds the poll", func() bool { return getJSON(b.url+"/v1/polls/p", &struct{}{}) == 200 })
		var want int64
		for round := range 4 {
			var wg sync.WaitGroup
			wg.Go(func() { sendVotes(t, b.url, fmt.Sprintf("b%d", round), 50) })
			want += 50
			if round == 0 { // the seed's own records, replayed from its ledger at each start
				wg.Go(func() { sendVotes(t, a.url, "a", 10) })
				want += 10
			}
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
			var killPeer, startPeer func()
			if round%2 == 1 {
				killPeer = func() { b.cmd.Process.Kill(); b.cmd.Wait() }
				startPeer = func() { b = startProcessNoWait(t, bin, peerDir, peerFlags...) }
			}
			a = killShownRestart(t, bin, seedDir, seedFlags, a, want, round, killPeer, startPeer)
			testwait.For(t, 60*time.Second, "the restarted seed and b one cluster again, both ready", func() bool {
				var c api.ClusterView
				return getJSON(b.url+"/v1/cluster", &c) == 200 && len(c.Members) == 2 && getJSON(b.url+"/readyz", &struct{}{}) == 200
			})
		}
	})
}

// createOnAirPoll creates poll p, open for an hour, at url.
func createOnAirPoll(t *testing.T, url string) {
	t.Helper()
	code, body, err := post(url+"/v1/polls", `{"id":"p","question":"Q?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"},{"id":"c","label":"C"}],"duration_s":3600}`,
		"Authorization", "Bearer "+testToken)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("create poll: %d %s %v", code, body, err)
	}
}

// sendVotes sends n new votes to p at url, from four clients; each must be
// acknowledged.
func sendVotes(t *testing.T, url, prefix string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			for i := c; i < n; i += 4 {
				key := fmt.Sprintf("%s-%d", prefix, i)
				code, body, err := post(url+"/v1/polls/p/votes", vote([]string{"a", "b", "c"}[i%3], key, key))
				if err != nil || code != http.StatusOK || !strings.Contains(string(body), `"accepted"`) {
					t.Errorf("vote %s at %s: %d %s %v", key, url, code, body, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// killShownRestart waits until the node p shows want on air, kills it
// with SIGKILL the moment it does (then calls afterKill, if any),
// restarts it on dir and reads its totals from the first moment its port
// answers until it is ready and has answered 20 reads: every total
// answered must be want or more.
// whileStarting, if any, is called once the restarted node's log says it
// has started gossip (the end of its start order). It returns the
// restarted node.
func killShownRestart(t *testing.T, bin, dir string, flags []string, p *procNode, want int64, round int, afterKill, whileStarting func()) *procNode {
	t.Helper()
	testwait.For(t, 30*time.Second, fmt.Sprintf("round %d: %d votes on air", round, want), func() bool {
		var v struct{ Total *int64 }
		return getJSON(p.url+"/v1/polls/p", &v) == 200 && v.Total != nil && *v.Total == want
	})
	if err := p.cmd.Process.Kill(); err != nil { // at once: what it just showed may be in no file yet
		t.Fatal(err)
	}
	p.cmd.Wait()
	if afterKill != nil {
		afterKill()
	}
	q := startProcessNoWait(t, bin, dir, flags...)
	started := time.Now()
	deadline := started.Add(60 * time.Second)
	answered, refused := 0, 0
	for i := 0; ; i++ {
		if whileStarting != nil && strings.Contains(q.log.String(), "gossip started") {
			whileStarting()
			whileStarting = nil
		}
		ready := getJSON(q.url+"/readyz", &struct{}{}) == http.StatusOK // before the reads: once ready, they are read after
		for _, read := range onAirReads(i) {
			total, code, err := read(q.url)
			switch {
			case err != nil:
				t.Fatalf("round %d: %v", round, err)
			case code == 0: // the port does not answer yet
			case code == http.StatusOK && total < want:
				t.Fatalf("round %d: %v after the restart the node served %d on air, %d before the kill\nits log:\n%s",
					round, time.Since(started).Round(time.Millisecond), total, want, q.log.String())
			case code == http.StatusOK:
				answered++
			case code == http.StatusServiceUnavailable:
				refused++
			default:
				t.Fatalf("round %d: a read answered %d", round, code)
			}
		}
		if ready && whileStarting == nil && answered >= 20 {
			t.Logf("round %d: %d reads answered (none below %d), %d refused with 503 while starting; ready after %v",
				round, answered, want, refused, time.Since(started).Round(time.Millisecond))
			return q
		}
		if time.Now().After(deadline) {
			t.Fatalf("round %d: not ready within 60 s of the restart\nits log:\n%s", round, q.log.String())
		}
	}
}

// onAirReads are the public reads of the total the i-th look makes: the
// poll and the list every time, the live stream every tenth (it holds a
// connection open until its first frame).
func onAirReads(i int) []func(url string) (int64, int, error) {
	reads := []func(string) (int64, int, error){pollTotal, listTotal}
	if i%10 == 0 {
		reads = append(reads, streamTotal)
	}
	return reads
}

// pollTotal reads GET /v1/polls/p's total; 0 for a status other than 200
// or a port not answering yet.
func pollTotal(url string) (int64, int, error) {
	var v struct{ Total *int64 }
	code := getJSON(url+"/v1/polls/p", &v)
	if code == http.StatusOK && v.Total == nil {
		return 0, code, fmt.Errorf("GET /v1/polls/p answered 200 with no total")
	}
	if code != http.StatusOK {
		return 0, code, nil
	}
	return *v.Total, code, nil
}

// listTotal reads p's total in GET /v1/polls.
func listTotal(url string) (int64, int, error) {
	var page api.PollPage
	code := getJSON(url+"/v1/polls", &page)
	if code != http.StatusOK {
		return 0, code, nil
	}
	for _, v := range page.Polls {
		if v.ID == "p" && v.Total != nil {
			return *v.Total, code, nil
		}
	}
	return 0, code, fmt.Errorf("GET /v1/polls answered 200 without p's total: %+v", page)
}

// streamTotal reads the total of the first frame of p's live stream
// (Server-Sent Events).
func streamTotal(url string) (int64, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/polls/p/events", nil)
	if err != nil {
		return 0, 0, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, nil // not answering yet
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, res.StatusCode, nil
	}
	lines := bufio.NewScanner(res.Body)
	for lines.Scan() {
		data, ok := strings.CutPrefix(lines.Text(), "data: ")
		if !ok {
			continue
		}
		var f api.Frame
		if err := json.Unmarshal([]byte(data), &f); err != nil {
			return 0, 0, fmt.Errorf("a live frame that does not decode: %q: %w", data, err)
		}
		if f.Type == api.TypeSnapshot || f.Type == api.TypeFinal {
			return f.Total, res.StatusCode, nil
		}
	}
	return 0, 0, fmt.Errorf("the live stream ended before its first frame: %v", lines.Err())
}

// TestKeptTalliesSurviveAPowerCut: what the keep loop writes is durable.
// Another replica's counts merged by gossip (the node's own come back
// from its ledger), kept once (keepTallies), survive a crash that loses
// every write not fsynced (Pebble on vfs.NewStrictMem); and the run mark
// tells the next start whether the last run stopped cleanly (keepLast)
// or not, so that only then it answers at once.
func TestKeptTalliesSurviveAPowerCut(t *testing.T) {
	fs := vfs.NewStrictMem()
	open := func() (*ledger.Ledger, *checkpoints) {
		l, err := ledger.Open(ledger.Config{Dir: "ledger", FS: fs, Replica: "eu-1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		st, err := state.New(state.Config{Replica: "eu-1", Store: l})
		if err != nil {
			t.Fatal(err)
		}
		c := &checkpoints{ledger: l, state: st, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		if err := c.loadTallies(); err != nil {
			t.Fatal(err)
		}
		return l, c
	}
	crash := func(l *ledger.Ledger) {
		fs.SetIgnoreSyncs(true)
		l.Close()
		fs.ResetToSyncedState()
		fs.SetIgnoreSyncs(false)
	}
	l, c := open()
	if !c.whole {
		t.Fatal("a new data dir is taken as after a crash")
	}
	now := time.Now()
	def := poll.Definition{ID: "p", Question: "Q?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: now.UnixMilli(), ClosesAt: now.Add(time.Hour).UnixMilli()}
	if _, err := c.state.Defs.PutPoll(def, hlc.Timestamp{Wall: now.UnixMilli(), Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	var shown uint64
	for round := range 3 {
		for range 3 { // a keep a tick, the replica's count rising between them
			shown += 10
			delta := crdt.NewTally()
			delta.MergeEntry("us-1", "a", shown, 0)
			delta.MergeRecords("us-1", shown)
			if _, err := c.state.Merge("p", delta); err != nil {
				t.Fatal(err)
			}
			if err := c.keepTallies(); err != nil {
				t.Fatal(err)
			}
		}
		crash(l)
		l, c = open()
		if _, total, err := c.state.Totals("p"); err != nil || total != int64(shown) {
			t.Fatalf("round %d: %d on air after the crash (%v), %d kept before", round, total, err, shown)
		}
		if c.whole {
			t.Fatalf("round %d: a start after a crash takes the kept tallies as whole", round)
		}
	}
	if err := c.keepLast(); err != nil {
		t.Fatal(err)
	}
	crash(l) // after the clean stop's last keep: nothing unsynced is left to lose
	l, c = open()
	defer l.Close()
	if !c.whole {
		t.Fatal("a start after a clean stop does not take the kept tallies as whole")
	}
}
