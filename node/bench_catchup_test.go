package node

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"tally/internal/testwait"
)

// markRE reads the wait for the clock's high-water mark from a node's log.
var markRE = regexp.MustCompile(`waited out the clock's high-water mark after an unclean stop.* waited=(\S+)`)

// ballotsRE reads the voter state's ballots of poll p from /metrics.
var ballotsRE = regexp.MustCompile(`(?m)^tally_voter_state_ballots\{poll="p"\} (\d+)`)

// TestCatchUpAfterKillAndTerm measures how long a full node of a
// three-region cluster of node processes takes to catch up with the
// other replicas' ballots after a restart, stopped with SIGTERM and with
// SIGKILL in turn (issue 45, item 7): votes in every region before the
// stop and at the two others while it is down, then the restarted node's
// log line "caught up … after=" (from its gate opening, after the replay)
// and the time from its start to /readyz 200. It asserts nothing about
// time (the figures are logged: BENCHMARKS.md, "Catch-up after kill -9
// and after SIGTERM"), only that the node caught up rather than waited
// out --catch-up-wait (10 s) and that it then holds every ballot.
//
// TALLY_CATCHUP_ROUNDS=N runs N rounds of each stop (skipped without it);
// TALLY_CATCHUP_LOAD=1 keeps votes flowing at every node through the stop
// and at the others until the node is back.
func TestCatchUpAfterKillAndTerm(t *testing.T) {
	rounds, err := strconv.Atoi(os.Getenv("TALLY_CATCHUP_ROUNDS"))
	if err != nil || rounds <= 0 {
		t.Skip("a measurement: TALLY_CATCHUP_ROUNDS=N runs it")
	}
	bin := buildNodeBinary(t)
	nodes := startThreeRegions(t, bin)
	waitFor(t, func() bool {
		for _, n := range nodes {
			var c struct{ Members []any }
			if getJSON(n.p.url+"/v1/cluster", &c) != 200 || len(c.Members) != 3 {
				return false
			}
		}
		return true
	})
	code, body, err := post(nodes[0].p.url+"/v1/polls", `{"id":"p","question":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"},{"id":"c","label":"C"}],"duration_s":3600}`,
		"Authorization", "Bearer "+testToken)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("create: %d %s %v", code, body, err)
	}
	total := 0
	voteAt := func(tag string, at []*regionProc, each int) {
		t.Helper()
		var wg sync.WaitGroup
		for i, n := range at {
			wg.Go(func() {
				waitFor(t, func() bool { return getJSON(n.p.url+"/v1/polls/p", &struct{}{}) == 200 })
				for v := range each {
					key := fmt.Sprintf("%s-%d-%d", tag, i, v)
					if code, body, err := post(n.p.url+"/v1/polls/p/votes", vote([]string{"a", "b", "c"}[v%3], key, key)); err != nil || code != 200 {
						t.Errorf("vote at %s: %d %s %v", n.p.url, code, body, err)
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		total += len(at) * each
	}
	ballots := func(n *regionProc) int {
		res, err := http.Get(n.p.url + "/metrics")
		if err != nil {
			return -1
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		m := ballotsRE.FindSubmatch(raw)
		if m == nil {
			return -1
		}
		v, _ := strconv.Atoi(string(m[1]))
		return v
	}
	// same waits until every node holds the same ballots of p as the
	// others, every acknowledged vote's included.
	same := func(nodes []*regionProc) {
		t.Helper()
		testwait.For(t, 30*time.Second, "every node holding every ballot", func() bool {
			first := ballots(nodes[0])
			for _, n := range nodes {
				if b := ballots(n); b != first || b < total {
					return false
				}
			}
			return true
		})
	}
	underLoad := os.Getenv("TALLY_CATCHUP_LOAD") != ""
	voteAt("before", nodes, 100)
	afterRE := regexp.MustCompile(`caught up with the other replicas' ballots; taking votes.* after=(\S+)`)
	type figure struct {
		stop            string
		victim          int
		caughtUp, ready time.Duration
		markWait        time.Duration // the clock's high-water mark waited out before gossip starts (an unclean stop)
		timedOut        bool
	}
	var figures []figure
	for round := range rounds {
		for _, stop := range []string{"SIGTERM", "SIGKILL"} {
			vi := round % 3 // n1 (the seed: no --join, it rejoins the members it kept), n2, n3 in turn
			victim := nodes[vi]
			others := []*regionProc{nodes[(vi+1)%3], nodes[(vi+2)%3]}
			same(nodes)
			var load sync.WaitGroup
			loading := make(chan struct{})
			if underLoad { // votes at every node while it stops, and at the others until it is back
				for i, n := range nodes {
					load.Go(func() {
						for v := 0; ; v++ {
							select {
							case <-loading:
								return
							default:
							}
							key := fmt.Sprintf("load-r%d-%s-%d-%d", round, stop, i, v)
							if code, _, err := post(n.p.url+"/v1/polls/p/votes", vote([]string{"a", "b", "c"}[v%3], key, key)); (err != nil || code != 200) && n == victim {
								return // stopped
							}
						}
					})
				}
				time.Sleep(500 * time.Millisecond) // votes flowing when the signal comes (this injects the fault; it waits for nothing)
			}
			if stop == "SIGTERM" {
				victim.p.cmd.Process.Signal(syscall.SIGTERM)
			} else {
				victim.p.cmd.Process.Kill()
			}
			victim.p.cmd.Wait()
			voteAt(fmt.Sprintf("r%d-%s", round, stop), others, 40)
			started := time.Now()
			victim.p = startProcessNoWait(t, bin, victim.dir, victim.flags...)
			deadline := time.Now().Add(30 * time.Second)
			for getJSON(victim.p.url+"/readyz", &struct{}{}) != 200 {
				if time.Now().After(deadline) {
					t.Fatalf("%s round %d: not ready in 30 s:\n%s", stop, round, victim.p.log.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			f := figure{stop: stop, victim: vi + 1, ready: time.Since(started)}
			close(loading)
			load.Wait()
			log := victim.p.log.String()
			if m := afterRE.FindStringSubmatch(log); m != nil {
				f.caughtUp, _ = time.ParseDuration(m[1])
			}
			if m := markRE.FindStringSubmatch(log); m != nil {
				f.markWait, _ = time.ParseDuration(m[1])
			}
			f.timedOut = strings.Contains(log, "not caught up with the other replicas' ballots")
			figures = append(figures, f)
			t.Logf("round %d, n%d after %s: caught up %v after its gate opened (timed out: %v), ready %v after its start (clock mark waited out: %v)",
				round, f.victim, stop, f.caughtUp, f.timedOut, f.ready.Round(time.Millisecond), f.markWait)
			if f.timedOut {
				t.Errorf("n%d after %s waited out --catch-up-wait:\n%s", f.victim, stop, log)
			}
		}
	}
	same(nodes)
	for _, stop := range []string{"SIGTERM", "SIGKILL"} {
		var ups, readies, marks []string
		for _, f := range figures {
			if f.stop == stop {
				ups, readies = append(ups, f.caughtUp.Round(time.Millisecond).String()), append(readies, f.ready.Round(time.Millisecond).String())
				marks = append(marks, f.markWait.String())
			}
		}
		t.Logf("%s: caught up after %s; ready after its start %s; clock mark waited out %s", stop, strings.Join(ups, ", "), strings.Join(readies, ", "), strings.Join(marks, ", "))
	}
}

// TestCatchUpAfterKillAndTermInTheEdgeTier is the same measurement in the
// edge tier's shape (startEdgeTier: a region of two full nodes and two
// edges beside a node of another region): a full node of the region,
// stopped with SIGTERM and with SIGKILL in turn while votes flow through
// both edges, and restarted. TALLY_CATCHUP_ROUNDS=N runs it.
func TestCatchUpAfterKillAndTermInTheEdgeTier(t *testing.T) {
	rounds, err := strconv.Atoi(os.Getenv("TALLY_CATCHUP_ROUNDS"))
	if err != nil || rounds <= 0 {
		t.Skip("a measurement: TALLY_CATCHUP_ROUNDS=N runs it")
	}
	et := startEdgeTier(t)
	et.us.createPoll(t, "p")
	et.seePoll(t, "p")
	afterRE := regexp.MustCompile(`caught up with the other replicas' ballots; taking votes.* after=(\S+)`)
	for round := range rounds {
		for _, stop := range []string{"SIGTERM", "SIGKILL"} {
			var load sync.WaitGroup
			loading := make(chan struct{})
			var acked atomic.Int64
			for c := range 4 {
				load.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-loading:
							return
						default:
						}
						key := fmt.Sprintf("load-%d-%s-%d-%d", round, stop, c, i)
						if a := voteAt(et.edges[c%2].url, "p", []string{"a", "b", "c"}[i%3], key, key); a.code == 200 {
							acked.Add(1)
						}
					}
				})
			}
			testwait.For(t, 40*time.Second, "votes flowing", func() bool { return acked.Load() >= 100 })
			victim := et.full[round%2]
			if stop == "SIGTERM" {
				victim.cmd.Process.Signal(syscall.SIGTERM)
			} else {
				victim.cmd.Process.Kill()
			}
			victim.cmd.Wait()
			before := acked.Load()
			testwait.For(t, 40*time.Second, "votes while it is down", func() bool { return acked.Load() >= before+100 })
			started := time.Now()
			restarted := startProcessNoWait(t, et.bin, et.fullDirs[round%2], et.fullFlags[round%2]...)
			et.full[round%2] = restarted
			testwait.For(t, 40*time.Second, "the restarted full node ready", func() bool {
				res, err := http.Get(restarted.url + "/readyz")
				if err != nil {
					return false
				}
				res.Body.Close()
				return res.StatusCode == 200
			})
			ready := time.Since(started)
			close(loading)
			load.Wait()
			log := restarted.log.String()
			up, mark := "none", "0s"
			if m := afterRE.FindStringSubmatch(log); m != nil {
				up = m[1]
			}
			if m := markRE.FindStringSubmatch(log); m != nil {
				mark = m[1]
			}
			timedOut := strings.Contains(log, "not caught up with the other replicas' ballots")
			t.Logf("round %d, eu full node %d after %s under load: caught up after %s (timed out: %v), ready %v after its start (clock mark waited out: %s)",
				round, round%2, stop, up, timedOut, ready.Round(time.Millisecond), mark)
			if timedOut {
				t.Errorf("the full node after %s waited out --catch-up-wait:\n%s", stop, log)
			}
			et.waitLinks(t)
		}
	}
}
