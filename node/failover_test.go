package node

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
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

// TestEdgeFailover is issue 59's failover, measured: an edge whose region
// (eu-west) has one full node, beside the full nodes of two other regions.
// That full node is frozen (SIGSTOP) and later resumed, then killed
// (SIGKILL) and started again, under a steady stream of votes through the
// edge. Each time the edge acknowledges votes through another region's
// full node, names it in /v1/cluster (relays_to), in tally_relay_target
// and in its log; once its region's full node is back and ready, votes go
// to it again and so does the edge's NATS leaf connection. No vote is
// ever answered "catching up": the edge relays only to ready full nodes.
//
// It prints the time from each fault to the first vote another full node
// acknowledged, and from each return to the first its own took. Timing
// fails nothing: a failover must happen within 30 s. One round of each
// fault by default; TALLY_FAILOVER_ROUNDS=20 (bench/failover.sh) runs
// that many, TALLY_FAILOVER_FREEZE sets how long a freeze lasts (3s).
func TestEdgeFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the node binary")
	}
	rounds, freeze := 1, 3*time.Second
	if v := os.Getenv("TALLY_FAILOVER_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TALLY_FAILOVER_ROUNDS=%q", v)
		}
		rounds = n
	}
	if v := os.Getenv("TALLY_FAILOVER_FREEZE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("TALLY_FAILOVER_FREEZE=%q", v)
		}
		freeze = d
	}
	ft := startFailoverTier(t)
	defer func() {
		if t.Failed() || os.Getenv("TALLY_FAILOVER_LOG") != "" {
			t.Logf("the edge's log:\n%s", ft.edge.log.String())
			t.Logf("the region's full node's log (its last start):\n%s", ft.full.log.String())
		}
	}()
	ft.us.createPollFor(t, "p", 3600)
	for _, url := range []string{ft.full.url, ft.edge.url} {
		testwait.For(t, 30*time.Second, url+" serving the poll", func() bool {
			res, err := http.Get(url + "/v1/polls/p")
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode == http.StatusOK
		})
	}
	load := startFailoverLoad(ft.edge.url, "p", 4)
	defer load.close()

	var stopped, killed, back []time.Duration
	var at time.Time // the last fault's
	fault := func(name string, do func()) time.Duration {
		t.Helper()
		ft.waitHome(t, load)
		at = time.Now()
		do()
		var first ack
		testwait.For(t, 30*time.Second, "a vote through the edge acknowledged by another full node after "+name, func() bool {
			var ok bool
			first, ok = load.firstAck(at, ft.fullRep)
			return ok
		})
		ft.relaysElsewhere(t, first.replica)
		t.Logf("%s at %s: first vote through %s after %v", name, at.Format("15:04:05.000"), first.replica, first.at.Sub(at).Round(time.Millisecond))
		return first.at.Sub(at)
	}
	for range rounds {
		stopped = append(stopped, fault("SIGSTOP", func() { ft.signal(t, syscall.SIGSTOP) }))
		<-time.After(time.Until(at.Add(freeze))) // the fault's own schedule, not a wait for a condition
		resumed := time.Now()
		ft.signal(t, syscall.SIGCONT)
		back = append(back, ft.backAfter(t, load, resumed))
	}
	for range rounds {
		killed = append(killed, fault("SIGKILL", func() { ft.signal(t, syscall.SIGKILL); ft.full.cmd.Wait() }))
		restarted := time.Now()
		ft.full = startProcessNoWait(t, ft.bin, ft.fullDir, ft.fullFlags...)
		back = append(back, ft.backAfter(t, load, restarted))
	}
	load.close()

	load.mu.Lock()
	defer load.mu.Unlock()
	if load.catchingUp > 0 {
		t.Errorf("%d votes were answered 503 catching up: the edge relayed to a full node that was not ready", load.catchingUp)
	}
	t.Logf("%d votes acknowledged; refused or unknown, by status: %v", len(load.acks), load.fail)
	t.Logf("first vote through another full node after SIGSTOP: %s", spread(stopped))
	t.Logf("first vote through another full node after SIGKILL: %s", spread(killed))
	t.Logf("first vote through the region's full node again after SIGCONT or its restart: %s", spread(back))
}

// failoverTier is an edge whose region (eu-west) has one full node, a
// process, beside two other regions' full nodes in the test process.
type failoverTier struct {
	us, ap    *testNode
	full      *procNode
	fullDir   string
	fullFlags []string
	fullRep   string // the eu-west full node's replica id
	edge      *procNode
	bin       string
}

func startFailoverTier(t *testing.T) *failoverTier {
	t.Helper()
	ft := &failoverTier{bin: buildNodeBinary(t)}
	other := func(region string, join []string) func(*Config) {
		return func(c *Config) {
			c.Region, c.Now, c.PushPull, c.Join = region, time.Now, 500*time.Millisecond, join
			c.Limits.IPRate, c.Limits.VoterRate = 0, 0 // every vote comes from 127.0.0.1 through the edge
		}
	}
	ft.us = startNode(t, t.TempDir(), other("us-east", nil))
	ft.ap = startNode(t, t.TempDir(), other("ap-south", []string{ft.us.GossipAddr()}))
	common := func(name string) []string {
		return []string{"--region", "eu-west", "--node-name", name, "--join", ft.us.GossipAddr(), "--gossip-addr", freePort(t),
			"--gossip-profile", "local", "--push-pull-interval", "500ms"}
	}
	ft.fullDir = t.TempDir()
	ft.fullFlags = append(common("eu-full"), "--nats-cluster-addr", "127.0.0.1:0", "--nats-gateway-addr", "127.0.0.1:0", "--nats-leaf-addr", "127.0.0.1:0")
	ft.full = startProcess(t, ft.bin, ft.fullDir, ft.fullFlags...)
	id, err := os.ReadFile(filepath.Join(ft.fullDir, "replica-id"))
	if err != nil {
		t.Fatal(err)
	}
	ft.fullRep = strings.TrimSpace(string(id))
	testwait.For(t, 30*time.Second, "three members", func() bool { return len(ft.us.gossip.Members()) == 3 })
	ft.edge = startProcess(t, ft.bin, t.TempDir(), append(common("eu-edge"), "--role", "edge")...)
	testwait.For(t, 30*time.Second, "four members", func() bool { return len(ft.us.gossip.Members()) == 4 })
	return ft
}

// signal sends sig to the region's full node, a process this test
// started.
func (ft *failoverTier) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := ft.full.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// cluster is the edge's GET /v1/cluster.
func (ft *failoverTier) cluster() api.ClusterView {
	var v api.ClusterView
	res, err := http.Get(ft.edge.url + "/v1/cluster")
	if err == nil {
		json.NewDecoder(res.Body).Decode(&v)
		res.Body.Close()
	}
	return v
}

// waitHome waits for the steady state before a fault: for a second, the
// edge relays to its region's full node alone, its leaf connection is on
// it, and that node acknowledges the votes.
func (ft *failoverTier) waitHome(t *testing.T, load *failoverLoad) {
	t.Helper()
	var since time.Time // home since
	testwait.For(t, 60*time.Second, "the edge relaying to its region's full node for a second, its leaf on it", func() bool {
		v := ft.cluster()
		home := len(v.RelaysTo) == 1 && v.RelaysTo[0].Replica == ft.fullRep && v.RelaysTo[0].Region == "eu-west" &&
			v.NATS != nil && v.NATS.LeafHub != nil && v.NATS.LeafHub.Node == "eu-full" && v.NATS.LeafHub.Region == "eu-west" &&
			load.lastReplica() == ft.fullRep
		switch {
		case !home:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		}
		_, took := load.firstAckBy(since, ft.fullRep)
		return home && took && time.Since(since) >= time.Second
	})
}

// relaysElsewhere checks that the edge says where it relays after a
// failover: in /v1/cluster, in tally_relay_target and in its log.
func (ft *failoverTier) relaysElsewhere(t *testing.T, replica string) {
	t.Helper()
	testwait.For(t, 10*time.Second, "relays_to naming "+replica, func() bool {
		for _, r := range ft.cluster().RelaysTo {
			if r.Replica == ft.fullRep {
				return false
			}
			if r.Replica == replica && r.Region != "eu-west" && r.Region != "" {
				return true
			}
		}
		return false
	})
	if !strings.Contains(metricsOf(t, ft.edge.url), `tally_relay_target{region="`) ||
		!strings.Contains(metricsOf(t, ft.edge.url), `replica="`+replica+`"} 1`) {
		t.Errorf("tally_relay_target does not name %s", replica)
	}
	if log := ft.edge.log.String(); !strings.Contains(log, "was "+ft.fullRep+" (region eu-west)") {
		t.Errorf("no log line says the edge relays elsewhere than %s", ft.fullRep)
	}
}

// backAfter waits for the region's full node to take votes through the
// edge again after at, and returns how long that took.
func (ft *failoverTier) backAfter(t *testing.T, load *failoverLoad, at time.Time) time.Duration {
	t.Helper()
	var first ack
	testwait.For(t, 60*time.Second, "the region's full node acknowledging votes through the edge again", func() bool {
		var ok bool
		first, ok = load.firstAckBy(at, ft.fullRep)
		return ok
	})
	return first.at.Sub(at)
}

func metricsOf(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// spread is durations as their median, 99th percentile and maximum.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Sorted(slices.Values(ds))
	at := func(p int) time.Duration { return s[(len(s)*p+99)/100-1] }
	return fmt.Sprintf("p50 %v, p99 %v, max %v (%d)", at(50).Round(time.Millisecond), at(99).Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}

// ack is one acknowledged vote: when its answer came and which replica
// took it.
type ack struct {
	at      time.Time
	replica string
}

// failoverLoad sends votes through the edge from a few clients, each a
// new key, and keeps every acknowledgement.
type failoverLoad struct {
	mu         sync.Mutex
	acks       []ack
	fail       map[int]int // refused or unknown, by status
	catchingUp int         // answered 503 catching up
	stop       chan struct{}
	once       sync.Once
	wg         sync.WaitGroup
}

func startFailoverLoad(url, poll string, clients int) *failoverLoad {
	l := &failoverLoad{stop: make(chan struct{}), fail: map[int]int{}}
	for c := range clients {
		l.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				key := fmt.Sprintf("fo-%d-%d", c, i)
				a := voteAt(url, poll, "a", key, key)
				l.mu.Lock()
				switch {
				case a.code == http.StatusOK && (a.status == "accepted" || a.status == "duplicate"):
					rep, _, _ := strings.Cut(a.voteID, "/")
					l.acks = append(l.acks, ack{at: time.Now(), replica: rep})
				case strings.Contains(a.body, "catching up"):
					l.catchingUp++
					fallthrough
				default:
					l.fail[a.code]++
				}
				l.mu.Unlock()
			}
		})
	}
	return l
}

func (l *failoverLoad) close() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// firstAck is the first acknowledgement after since by a replica other
// than not.
func (l *failoverLoad) firstAck(since time.Time, not string) (ack, bool) {
	return l.first(since, func(r string) bool { return r != not })
}

// firstAckBy is the first acknowledgement after since by replica.
func (l *failoverLoad) firstAckBy(since time.Time, replica string) (ack, bool) {
	return l.first(since, func(r string) bool { return r == replica })
}

func (l *failoverLoad) first(since time.Time, by func(string) bool) (ack, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.acks {
		if a.at.After(since) && by(a.replica) {
			return a, true
		}
	}
	return ack{}, false
}

// lastReplica is the replica that took the last acknowledged vote.
func (l *failoverLoad) lastReplica() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.acks) == 0 {
		return ""
	}
	return l.acks[len(l.acks)-1].replica
}
