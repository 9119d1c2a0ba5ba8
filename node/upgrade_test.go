package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tally/api"
	"tally/internal/testwait"
)

// The rolling upgrade run (./scripts/upgrade.sh): the previous release,
// built from its git tag, on three regions of two full nodes
// (--ack-copies 2) and an edge each; voters vote through the edges
// throughout; every process is stopped (SIGTERM) and started on the same
// data dir with this build as the chart rolls them (a full node of each
// region at once, the edges beside them), then back to the previous
// release one process at a time. Every acknowledged vote must be in
// the certified result, each voter's last vote the one counted, and no
// process's live total may ever fall. It prints the refusals each phase
// met (503, 504, no answer) and the longest wait of a vote.
func TestRollingUpgradeAndRollback(t *testing.T) {
	if os.Getenv("TALLY_UPGRADE") == "" {
		t.Skip("the rolling upgrade run builds the previous release: ./scripts/upgrade.sh (TALLY_UPGRADE=1)")
	}
	prevTag, prev := buildPreviousRelease(t)
	cur := buildNodeBinary(t)
	t.Logf("previous release %s; this build %s", prevTag, cur)
	c := startUpgradeCluster(t, prev)
	// Two polls: in "up" every voter votes once, so its live total may
	// never fall; in "mind" every other voter changes their mind, and a
	// second vote that lands on another full node (as during a failover)
	// is counted there at once and retracted by the first node only when
	// its gossip arrives, so the total may exceed the truth meanwhile
	// (docs/certification.md, "The live tally", Limits): its falls are
	// reported.
	for _, id := range []string{"up", "mind"} {
		if code, body, err := post(c.procs[0].url()+"/v1/polls", `{"id":"`+id+`","question":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"},{"id":"c","label":"C"}],"duration_s":3600,"grace_s":1}`,
			"Authorization", "Bearer "+testToken); err != nil || code != http.StatusCreated {
			t.Fatalf("create %s: %d %s %v", id, code, body, err)
		}
		for _, p := range c.procs {
			testwait.For(t, 30*time.Second, p.name+" serves "+id, func() bool { return getJSON(p.url()+"/v1/polls/"+id, &struct{}{}) == 200 })
		}
	}
	w := startWatch(c, "up", "mind")
	v := startUpgradeVoters(t, c, 6)
	// Up as the chart rolls (helm upgrade): every region's StatefulSet
	// replaces one full node at a time, highest ordinal first, all
	// regions at once, while the edges' Deployments roll beside them.
	// Back as docs/operations.md's manual procedure: one process at a time.
	full, edges := c.procs[:len(c.procs)-len(c.edges)], c.edges
	waves := [][]*upgradeProc{{full[1], full[3], full[5], edges[0]}, {full[0], full[2], full[4], edges[1]}, {edges[2]}}
	phase := func(name, bin string, waves [][]*upgradeProc) {
		v.phase(name)
		start := time.Now()
		for _, wave := range waves {
			c.restart(t, bin, wave...)
		}
		t.Logf("%s: %d processes restarted in %d steps in %v", name, len(c.procs), len(waves), time.Since(start).Round(time.Second))
	}
	v.phase("before")
	testwait.For(t, 30*time.Second, "votes acknowledged before the upgrade", func() bool { return v.acked() >= 200 })
	phase("upgrade "+prevTag+" → this build", cur, waves)
	var one [][]*upgradeProc
	for _, u := range c.procs {
		one = append(one, []*upgradeProc{u})
	}
	phase("rollback → "+prevTag, prev, one)
	v.phase("after")
	n := v.acked()
	testwait.For(t, 30*time.Second, "votes acknowledged after the rollback", func() bool { return v.acked() >= n+200 })
	want := v.stop(t)
	w.stop()
	v.report(t)
	if falls := w.falls("up"); len(falls) > 0 {
		t.Errorf("the live total of a poll without changes of mind fell: %s", strings.Join(falls, "; "))
	}
	falls := w.falls("mind")
	t.Logf("poll with changes of mind (%d changes acknowledged): the live total fell %d times at some process, by at most %d: %s",
		v.changes, len(falls), w.deepest, strings.Join(falls, "; "))
	c.certifiedAs(t, "up", want["up"])
	c.certifiedAs(t, "mind", want["mind"])
}

// buildPreviousRelease builds the node binary of the release before this
// one from its git tag ($TALLY_PREVIOUS, or the newest tag among HEAD's
// ancestors that is not on HEAD itself).
func buildPreviousRelease(t *testing.T) (tag, bin string) {
	t.Helper()
	git := func(args ...string) string {
		out, err := exec.Command("git", args...).Output()
		if err != nil {
			t.Fatalf("git %s: %v (the rolling upgrade run needs the repository's history and tags: a full clone)", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	tag = os.Getenv("TALLY_PREVIOUS")
	if tag == "" {
		head := git("rev-parse", "HEAD")
		for _, tg := range strings.Fields(git("tag", "--merged", "HEAD", "--sort=-v:refname", "v*")) {
			if git("rev-list", "-n1", tg) != head {
				tag = tg
				break
			}
		}
	}
	if tag == "" {
		t.Fatal("no earlier release is tagged (git tag --merged HEAD 'v*'): fetch the tags, or name one in $TALLY_PREVIOUS")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("sh", "-c", `git archive --format=tar "$1" | tar -x -C "$2"`, "sh", tag, src)
	archive.Dir = git("rev-parse", "--show-toplevel") // run in node/, git archive would take node/ only
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", tag, err, out)
	}
	bin = filepath.Join(dir, "tally-node-"+tag)
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X tally/internal/buildinfo.stamped="+tag, "./cmd/node")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", tag, err, out)
	}
	return tag, bin
}

// upgradeProc is one process of the upgrade cluster, at fixed addresses
// so that a restart comes back where its clients and peers look.
type upgradeProc struct {
	name, dir string
	edge      bool
	flags     []string
	mu        sync.Mutex
	p         *procNode
}

func (u *upgradeProc) url() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.p.url
}

type upgradeCluster struct {
	procs []*upgradeProc // full nodes, then edges
	edges []*upgradeProc // one a region, in regions' order
}

var upgradeRegions = []string{"eu-west", "us-east", "ap-south"}

// startUpgradeCluster starts three regions of two full nodes and an edge
// each on bin, every vote on two machines.
func startUpgradeCluster(t *testing.T, bin string) *upgradeCluster {
	return startRegionCluster(t, bin, 2, "--ack-copies", "2")
}

// startRegionCluster starts three regions of full full nodes (with
// fullFlags) and an edge each on bin, and waits until they are whole.
func startRegionCluster(t *testing.T, bin string, full int, fullFlags ...string) *upgradeCluster {
	t.Helper()
	c := &upgradeCluster{}
	seed := freePort(t)
	common := []string{"--gossip-profile", "local", "--push-pull-interval", "500ms", "--nats-cluster-addr", "127.0.0.1:0"}
	for _, region := range upgradeRegions {
		for i := range full {
			gossipAddr := freePort(t)
			if len(c.procs) == 0 {
				gossipAddr = seed
			}
			name := fmt.Sprintf("%s-full-%d", region, i)
			flags := append([]string{"--region", region, "--node-name", name, "--gossip-addr", gossipAddr, "--join", seed, "--http-addr", freePort(t),
				"--nats-gateway-addr", "127.0.0.1:0", "--nats-leaf-addr", "127.0.0.1:0"}, fullFlags...)
			c.procs = append(c.procs, &upgradeProc{name: name, dir: t.TempDir(), flags: append(flags, common...)})
		}
	}
	for _, region := range upgradeRegions {
		name := region + "-edge"
		e := &upgradeProc{name: name, dir: t.TempDir(), edge: true, flags: append([]string{"--region", region, "--node-name", name, "--role", "edge",
			"--gossip-addr", freePort(t), "--join", seed, "--http-addr", freePort(t)}, common...)}
		c.procs, c.edges = append(c.procs, e), append(c.edges, e)
	}
	for _, u := range c.procs {
		u.p = startProcessNoWait(t, bin, u.dir, u.flags...)
	}
	c.whole(t)
	return c
}

// whole waits until every process is ready and every full node counts
// every process a member.
func (c *upgradeCluster) whole(t *testing.T) {
	t.Helper()
	testwait.For(t, 120*time.Second, "every process ready and every member seen", func() bool {
		for _, u := range c.procs {
			if getJSON(u.url()+"/readyz", &struct{}{}) != 200 {
				return false
			}
			var v api.ClusterView
			if !u.edge && (getJSON(u.url()+"/v1/cluster", &v) != 200 || len(v.Members) != len(c.procs)) {
				return false
			}
		}
		return true
	})
}

// restart stops the processes at once with SIGTERM (each drains),
// starts bin on each one's data dir and addresses, and waits until the
// cluster is whole again.
func (c *upgradeCluster) restart(t *testing.T, bin string, procs ...*upgradeProc) {
	t.Helper()
	var wg sync.WaitGroup
	for _, u := range procs {
		u.mu.Lock()
		old := u.p
		u.mu.Unlock()
		old.cmd.Process.Signal(syscall.SIGTERM)
		wg.Go(func() {
			done := make(chan error, 1)
			go func() { done <- old.cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s did not stop cleanly on SIGTERM: %v\n%s", u.name, err, old.log.String())
				}
			case <-time.After(60 * time.Second):
				t.Errorf("%s still running 60 s after SIGTERM", u.name)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, u := range procs {
		p := startProcessNoWait(t, bin, u.dir, u.flags...)
		u.mu.Lock()
		u.p = p
		u.mu.Unlock()
	}
	c.whole(t)
}

// certifiedAs closes the poll and waits until every full node serves a
// certificate whose totals are want.
func (c *upgradeCluster) certifiedAs(t *testing.T, poll string, want map[string]uint64) {
	t.Helper()
	if code, body, err := post(c.procs[0].url()+"/v1/polls/"+poll+"/close", "", "Authorization", "Bearer "+testToken); err != nil || code != 200 {
		t.Fatalf("close: %d %s %v", code, body, err)
	}
	var total uint64
	for _, n := range want {
		total += n
	}
	for _, u := range c.procs {
		var res api.ResultView
		testwait.For(t, 90*time.Second, u.name+" serves the certified result", func() bool {
			return getJSON(u.url()+"/v1/polls/"+poll+"/result", &res) == 200 && res.Status == "reconciled"
		})
		for _, o := range []string{"a", "b", "c"} {
			if res.Totals[o] != want[o] {
				t.Fatalf("%s: certified %v (total %d), the acknowledged votes' last choices are %v (total %d)", u.name, res.Totals, res.Total, want, total)
			}
		}
	}
	t.Logf("certified everywhere: %v, total %d, equal to every voter's last acknowledged vote", want, total)
}

// upgradeWatch reads every process's live totals as a viewer would and
// notes every fall, per poll.
type upgradeWatch struct {
	start   time.Time
	stopc   chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	fell    map[string][]string // poll → falls
	deepest int64
}

func startWatch(c *upgradeCluster, polls ...string) *upgradeWatch {
	w := &upgradeWatch{start: time.Now(), stopc: make(chan struct{}), fell: map[string][]string{}}
	for _, u := range c.procs {
		for _, poll := range polls {
			w.wg.Go(func() { w.watch(u, poll) })
		}
	}
	return w
}

func (w *upgradeWatch) watch(u *upgradeProc, poll string) {
	var high int64
	for {
		select {
		case <-w.stopc:
			return
		case <-time.After(100 * time.Millisecond):
		}
		var v api.PollView
		if getJSON(u.url()+"/v1/polls/"+poll, &v) != 200 || v.Total == nil {
			continue
		}
		if *v.Total < high {
			w.mu.Lock()
			w.fell[poll] = append(w.fell[poll], fmt.Sprintf("%s %d after %d at %.1f s", u.name, *v.Total, high, time.Since(w.start).Seconds()))
			w.deepest = max(w.deepest, high-*v.Total)
			w.mu.Unlock()
		}
		high = max(high, *v.Total)
	}
}

func (w *upgradeWatch) stop() { close(w.stopc); w.wg.Wait() }

func (w *upgradeWatch) falls(poll string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.fell[poll])
}

// upgradeVoters send votes through the edges, each voter's votes one
// after the other, and count what each phase of the run met.
type upgradeVoters struct {
	c     *upgradeCluster
	stopc chan struct{}
	wg    sync.WaitGroup

	mu      sync.Mutex
	cur     string
	phases  []string
	stats   map[string]*phaseStats
	last    map[[2]string]string // poll, voter → option of their last acknowledged vote
	n       int
	changes int       // acknowledged changes of mind
	lastAck time.Time // of any vote
}

// phaseStats is what the voters met during one phase.
type phaseStats struct {
	acked                     int
	status503, status504, oth int
	noAnswer                  int
	longest                   time.Duration // a vote's first try to its acknowledgement
	gap                       time.Duration // the longest time without any acknowledgement
}

func startUpgradeVoters(t *testing.T, c *upgradeCluster, workers int) *upgradeVoters {
	v := &upgradeVoters{c: c, stopc: make(chan struct{}), stats: map[string]*phaseStats{}, last: map[[2]string]string{}}
	v.phase("before")
	for w := range workers {
		v.wg.Go(func() { v.run(t, w) })
	}
	return v
}

func (v *upgradeVoters) phase(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stats[name] == nil {
		v.stats[name] = &phaseStats{}
		v.phases = append(v.phases, name)
	}
	v.cur = name
}

func (v *upgradeVoters) acked() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.n
}

// run is one worker. Even rounds: a new voter in "up". Odd rounds: in
// "mind", a new voter, or (every other time) the previous one changing
// their mind, sending the stamp they got as After.
func (v *upgradeVoters) run(t *testing.T, w int) {
	options := []string{"a", "b", "c"}
	prevVoter, prevStamp := "", ""
	for i := 0; ; i++ {
		select {
		case <-v.stopc:
			return
		case <-time.After(20 * time.Millisecond):
		}
		poll, voter, option, after := "up", fmt.Sprintf("w%d-v%d", w, i), options[(w+i)%3], ""
		change := false
		if i%2 == 1 {
			poll = "mind"
			if i%4 == 3 && prevVoter != "" {
				voter, option, after, change = prevVoter, options[(w+i+1)%3], prevStamp, true
			}
		}
		body := fmt.Sprintf(`{"option":%q,"voter":%q,"idem":%q,"after":%q}`, option, voter, fmt.Sprintf("w%d-k%d", w, i), after)
		res, ok := v.send(t, w, poll, body)
		if !ok {
			return
		}
		v.mu.Lock()
		v.last[[2]string{poll, voter}] = option
		v.n++
		if change {
			v.changes++
		}
		v.mu.Unlock()
		if poll == "mind" {
			prevVoter, prevStamp = voter, res.Stamp
		}
	}
}

// send sends one vote until it is acknowledged: to the worker's region's
// edge first, to the next region's on a refusal, as a page whose edge
// fails over does. It gives up after a minute (failing the test) or when
// the run stops before a first try.
func (v *upgradeVoters) send(t *testing.T, w int, poll, body string) (api.VoteResult, bool) {
	start := time.Now()
	for try := 0; ; try++ {
		edge := v.c.edges[(w+try/2)%len(v.c.edges)]
		code, b, err := post(edge.url()+"/v1/polls/"+poll+"/votes", body)
		var res api.VoteResponse
		if err == nil && code == 200 && json.Unmarshal(b, &res) == nil && len(res.Results) == 1 {
			r := res.Results[0]
			if r.Status != api.StatusAccepted && r.Status != api.StatusDuplicate {
				t.Errorf("vote %s answered %s (%s)", body, r.Status, r.Error)
				return r, false
			}
			v.count(func(s *phaseStats) {
				s.acked++
				s.longest = max(s.longest, time.Since(start))
				if !v.lastAck.IsZero() {
					s.gap = max(s.gap, time.Since(v.lastAck))
				}
				v.lastAck = time.Now()
			})
			return r, true
		}
		v.count(func(s *phaseStats) {
			switch {
			case err != nil:
				s.noAnswer++
			case code == 503:
				s.status503++
			case code == 504:
				s.status504++
			default:
				s.oth++
			}
		})
		if code != 0 && code != 503 && code != 504 {
			t.Errorf("vote %s at %s: %d %s", body, edge.name, code, b)
			return api.VoteResult{}, false
		}
		if time.Since(start) > time.Minute {
			t.Errorf("vote %s not acknowledged within a minute", body)
			return api.VoteResult{}, false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (v *upgradeVoters) count(f func(*phaseStats)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f(v.stats[v.cur])
}

// stop ends the voters and returns, per poll, each option's count of
// voters whose last acknowledged vote chose it.
func (v *upgradeVoters) stop(t *testing.T) map[string]map[string]uint64 {
	close(v.stopc)
	v.wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	want := map[string]map[string]uint64{"up": {}, "mind": {}}
	for k, o := range v.last {
		want[k[0]][o]++
	}
	return want
}

func (v *upgradeVoters) report(t *testing.T) {
	v.mu.Lock()
	defer v.mu.Unlock()
	t.Logf("%-32s %8s %6s %6s %9s %6s %12s %14s", "phase", "acked", "503", "504", "no answer", "other", "longest wait", "longest no ack")
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s" }
	for _, name := range v.phases {
		s := v.stats[name]
		t.Logf("%-32s %8d %6d %6d %9d %6d %12s %14s", name, s.acked, s.status503, s.status504, s.noAnswer, s.oth, secs(s.longest), secs(s.gap))
	}
}
