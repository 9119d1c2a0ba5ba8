package node

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tally/ledger"
)

// BenchmarkLiveExactness measures how far each region's live tally is from
// what certification computes from the three ledgers at that moment, while
// votes flow and after the last one, with 100 ms RTT between regions
// (NATS supercluster through delaying proxies, push/pull off). 3,000
// voters send 12,000 requests at about 1,200 a second from 8 clients: a
// voter's first vote at its home region, then changes of mind, and 10%
// retries of an earlier request; 30% of changes and retries at another
// region. A sampler
// reconciles the ledgers every 100 ms and records every region's
// |live - exact| summed over options. It prints the largest difference
// while votes flow (also as a share of the exact total), the time from the
// last ack until every region is exact, and the gossip bytes each node
// sent per vote, beside how far above the certified total the design
// before cross-region ballots (each region alone) would end. Nothing is
// asserted about time. Run with ./bench/exact.sh.
func BenchmarkLiveExactness(b *testing.B) {
	const (
		voters   = 3000
		requests = 12_000
		clients  = 8
		rate     = 1200 // requests per second, all clients together
	)
	regions := []string{"eu-west", "us-east", "ap-south"}
	urls := supercluster(b, regions, 50*time.Millisecond)
	var nodes []*testNode
	for i, region := range regions {
		nodes = append(nodes, startNode(b, b.TempDir(), func(c *Config) {
			c.Region, c.NATSURL, c.PushPull = region, urls[region], time.Hour
			c.Limits.IPRate, c.Limits.VoterRate, c.TrustFloor = 0, 0, 0
			if i > 0 {
				c.Join = []string{nodes[0].GossipAddr()}
			}
		}))
	}
	for b.Loop() {
		poll := fmt.Sprintf("p%d", time.Now().UnixNano())
		nodes[0].createPoll(b, poll)
		havePoll(b, nodes, poll)

		// The plan: each request names a random voter. 10% retry an earlier
		// request (same key); the others are votes, a change of mind when
		// the voter voted before. A voter's first vote goes to its home
		// region; 30% of changes of mind and retries go to another.
		type req struct{ voter, option, idem string }
		rng := rand.New(rand.NewPCG(7, 9))
		type step struct {
			r  req
			at int
		}
		plan := make([]step, requests)
		var earlier []step
		voted := map[int]bool{}
		crossed := 0
		for i := range plan {
			v := rng.IntN(voters)
			st := step{req{fmt.Sprint("v", v), []string{"a", "b", "c"}[rng.IntN(3)], fmt.Sprintf("%s-%d", poll, i)}, v % 3}
			again := voted[v]
			if len(earlier) > 0 && rng.IntN(10) == 0 {
				st, again = earlier[rng.IntN(len(earlier))], true
			}
			if again && rng.IntN(10) < 3 {
				st.at = (st.at + 1 + rng.IntN(2)) % 3
				crossed++
			}
			voted[v] = true
			plan[i] = st
			earlier = append(earlier, st)
		}

		var diffMu sync.Mutex
		maxDiff, maxShare := int64(0), 0.0
		var lastAck atomic.Int64
		done := make(chan struct{})
		sampler := make(chan time.Duration, 1)
		go func() { // the sampler
			var exactAt time.Time
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				diff, total := exactness(b, nodes, poll)
				diffMu.Lock()
				select {
				case <-done:
					if diff == 0 {
						if exactAt.IsZero() {
							exactAt = time.Now()
						}
						sampler <- exactAt.Sub(time.Unix(0, lastAck.Load()))
						diffMu.Unlock()
						return
					}
					exactAt = time.Time{}
				default:
					if diff > maxDiff {
						maxDiff = diff
					}
					if total >= 500 && float64(diff)/float64(total) > maxShare {
						maxShare = float64(diff) / float64(total)
					}
				}
				diffMu.Unlock()
				<-t.C
			}
		}()
		var next atomic.Int64
		var acked, dup atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= requests {
						return
					}
					if wait := time.Until(start.Add(time.Duration(i) * time.Second / rate)); wait > 0 {
						time.Sleep(wait) // the load's schedule, not a wait for a condition
					}
					p := plan[i]
					r := nodes[p.at].call(b, "POST", "/v1/polls/"+poll+"/votes", vote(p.r.option, p.r.voter, p.r.idem))
					if r.status != http.StatusOK {
						b.Errorf("vote: %d %s", r.status, r.raw)
						return
					}
					acked.Add(1)
					if strings.Contains(r.raw, `"duplicate"`) {
						dup.Add(1)
					}
					lastAck.Store(time.Now().UnixNano())
				}
			}()
		}
		wg.Wait()
		flowed := time.Since(start)
		close(done)
		var toExact time.Duration
		select {
		case toExact = <-sampler:
		case <-time.After(60 * time.Second):
			b.Fatal("the live tally did not become exact within 60 s")
		}
		var bytesOut float64
		for _, n := range nodes {
			bytesOut += metricValue(b, []*testNode{n}, "tally_gossip_bytes_total", `direction="out"`)
		}
		res, _ := reconcileAll(b, nodes, poll)
		// What the design before cross-region ballots showed: each region
		// counting its own records by the same rules, alone.
		var before int64
		for _, n := range nodes {
			own, err := ledger.ReconcileWith(ledger.ReconcileConfig{Poll: poll}, n.Ledger().Scan(poll))
			if err != nil {
				b.Fatal(err)
			}
			before += int64(own.Total)
		}
		b.ReportMetric(float64(acked.Load())/flowed.Seconds(), "req/s")
		b.ReportMetric(float64(maxDiff), "max-diff-votes")
		b.ReportMetric(100*maxShare, "max-diff-%-of-total")
		b.ReportMetric(100*float64(before-int64(res.Total))/float64(res.Total), "per-region-design-excess-%")
		b.ReportMetric(float64(toExact.Milliseconds()), "exact-after-last-ack-ms")
		b.ReportMetric(bytesOut/float64(len(nodes))/float64(res.Records), "gossip-bytes/vote/node")
		b.ReportMetric(float64(dup.Load()), "duplicates")
		b.ReportMetric(float64(crossed), "crossed-requests")
		b.ReportMetric(float64(res.Total), "certified-total")
		b.ReportMetric(float64(res.Superseded), "superseded")
	}
}

// reconcileAll is what certification would compute now from every node's
// ledger.
func reconcileAll(tb testing.TB, nodes []*testNode, poll string) (*ledger.Result, error) {
	var streams []iter.Seq2[ledger.Record, error]
	for _, n := range nodes {
		streams = append(streams, n.Ledger().Scan(poll))
	}
	return ledger.ReconcileWith(ledger.ReconcileConfig{Poll: poll}, streams...)
}

// exactness returns the largest |live - exact| (summed over options) of
// any region, and the exact total.
func exactness(tb testing.TB, nodes []*testNode, poll string) (int64, int64) {
	res, err := reconcileAll(tb, nodes, poll)
	if err != nil {
		return -1, 0
	}
	var worst int64
	for _, n := range nodes {
		live, _, err := n.state.Totals(poll)
		if err != nil {
			return -1, 0
		}
		var d int64
		for _, o := range []string{"a", "b", "c"} {
			d += abs(live[o] - int64(res.Totals[o]))
		}
		worst = max(worst, d)
	}
	return worst, int64(res.Total)
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
