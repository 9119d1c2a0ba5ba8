package fleet

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// figures close to a 2-core machine's (bench/fleet/figures.json's shape).
func testFigures() Figures {
	f := Figures{
		FullIdleCores: 0.013, EdgeIdleCores: 0.013, FullBaseRSS: 60e6, EdgeBaseRSS: 50e6,
		FullPerMessageUs: 500, FullPerVoteUs: 25, EdgePerVoteUs: 80, RelayBytesPerVote: 400,
		FullRSSPerVote: 600, EdgeRSSPerViewer: 25_000, EdgePerFrameUs: 14, GossipBallotBytesPerVote: 60,
		MergeAddRecordsPerS: 7e5, MergeResultRecordsPerS: 1e7,
	}
	f.Gossip.Polls1, f.Gossip.Polls11 = 2000, 8000
	f.Ack.Rate, f.Ack.P50, f.Ack.P99, f.Ack.FullCores = 2000, 4, 29, 0.3
	return f
}

func seedNight() Night {
	return Night{Votes: 1e6, Window: 30 * time.Second, Burst: 1e5, Viewers: 5e6, Regions: 3, Cores: 8, Memory: 32 << 30,
		Tick: time.Second, Busy: 0.6, Files: 1e6, RTT: 20 * time.Millisecond, CrossRTT: 200 * time.Millisecond, Settle: time.Second}
}

// The plan's counts follow its formulas: enough edges for the frames, the
// votes, the memory and the sockets of a region, each within its share of
// a machine; enough full nodes for the relay messages and votes.
func TestPlanKeepsEveryProcessWithinItsShare(t *testing.T) {
	n, f := seedNight(), testFigures()
	p, err := Make(n, f)
	if err != nil {
		t.Fatal(err)
	}
	if p.Edge.Cores > n.Cores*n.Busy+1e-9 || p.Edge.RSS > n.Memory*n.Busy || p.Full.Cores > n.Cores*n.Busy+1e-9 {
		t.Fatalf("a process past its share: %+v", p)
	}
	// One edge fewer would not do.
	viewers, votes := n.Viewers/3, n.Burst/3
	fewer := float64(p.Edge.Count - 1)
	need := (votes*f.EdgePerVoteUs + viewers/n.Tick.Seconds()*f.EdgePerFrameUs) / 1e6
	if need/fewer <= n.Cores*n.Busy-f.EdgeIdleCores && viewers*f.EdgeRSSPerViewer/fewer <= n.Memory*n.Busy-f.EdgeBaseRSS {
		t.Fatalf("%d edges planned where %v would do", p.Edge.Count, fewer)
	}
	if p.Headroom < 0.3 || p.Headroom > 1 {
		t.Fatalf("headroom %v", p.Headroom)
	}
	var b strings.Builder
	p.Write(&b)
	for _, want := range []string{"per region:", "edge at the peak", "full node at the peak", "NATS:", "certified", "headroom"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("plan lacks %q:\n%s", want, b.String())
		}
	}
}

// More of the load means no fewer processes; a longer tick, no more edges.
func TestPlanGrowsWithTheNight(t *testing.T) {
	f := testFigures()
	small := seedNight()
	small.Viewers, small.Burst, small.Votes = 1e5, 5000, 1e5
	ps, _ := Make(small, f)
	pb, _ := Make(seedNight(), f)
	if pb.Edge.Count < ps.Edge.Count || pb.Full.Count < ps.Full.Count || pb.Certify < ps.Certify {
		t.Fatalf("a bigger night got a smaller plan: %+v vs %+v", pb, ps)
	}
	fast := seedNight()
	fast.Tick = 250 * time.Millisecond
	pf, _ := Make(fast, f)
	if pf.Edge.Count < pb.Edge.Count || pf.FreshP99 >= pb.FreshP99 {
		t.Fatalf("a shorter tick: %d edges, fresh %v; at 1 s: %d, %v", pf.Edge.Count, pf.FreshP99, pb.Edge.Count, pb.FreshP99)
	}
}

// Relay messages: a message per window at low rates, full batches at high.
func TestPlanBatchesRelayMessages(t *testing.T) {
	f := testFigures()
	n := seedNight()
	n.Viewers, n.Burst, n.Votes, n.Regions = 1000, 300, 3000, 1
	p, _ := Make(n, f)
	if math.Abs(p.VotesPerMessage-1) > 1e-9 {
		t.Fatalf("at 300 votes/s: %v votes a message, want 1", p.VotesPerMessage)
	}
	n.Burst, n.Votes = 2e5, 2e6
	p, _ = Make(n, f)
	if p.VotesPerMessage < 40 || p.Edge.Count < 2 || p.Full.Count < 2 {
		t.Fatalf("at 200,000 votes/s: %d edges, %d full nodes, %v votes a message", p.Edge.Count, p.Full.Count, p.VotesPerMessage)
	}
}

// Bad nights and figures are refused with the field named.
func TestPlanRefusesBadInput(t *testing.T) {
	f := testFigures()
	for name, mutate := range map[string]func(*Night){
		"regions": func(n *Night) { n.Regions = 0 },
		"cores":   func(n *Night) { n.Cores = 0 },
		"memory":  func(n *Night) { n.Memory = 1 },
		"tick":    func(n *Night) { n.Tick = 5 * time.Second },
		"busy":    func(n *Night) { n.Busy = math.NaN() },
		"votes":   func(n *Night) { n.Votes = math.Inf(1) },
		"viewers": func(n *Night) { n.Viewers = -1 },
		"burst":   func(n *Night) { n.Burst = 10 },
		"window":  func(n *Night) { n.Window = 0 },
		"files":   func(n *Night) { n.Files = 0 },
		"rtt":     func(n *Night) { n.RTT = -time.Second },
		"settle":  func(n *Night) { n.Settle = -time.Second },
		"burst ":  func(n *Night) { n.Burst = 1e308 },
		"memory ": func(n *Night) { n.Memory = math.Inf(1) },
	} {
		n := seedNight()
		mutate(&n)
		if _, err := Make(n, f); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), strings.TrimSpace(name)) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Nights no fleet of these machines holds within the model's bounds
	// are refused, never printed as a plan past its machines.
	for name, mutate := range map[string]func(*Night){
		"ten million votes a second":               func(n *Night) { n.Burst = 1e7 },
		"busy at the idle":                         func(n *Night) { n.Busy = 0.05; n.Cores = 1 },
		"a billion viewers, 100 sockets a process": func(n *Night) { n.Viewers = 1e9; n.Files = 100 },
	} {
		n := seedNight()
		mutate(&n)
		if p, err := Make(n, f); !errors.Is(err, ErrDoesNotFit) {
			t.Errorf("%s: %v, plan %+v", name, err, p)
		}
	}
	good := `{"full_idle_cores":0.02,"edge_idle_cores":0.02,"full_base_rss_bytes":4e7,"edge_base_rss_bytes":4e7,"full_us_per_relay_message":1400,"full_us_per_relayed_vote":28,"edge_us_per_socket_vote":215,"relay_bytes_per_vote":286,"full_rss_bytes_per_vote":1100,"edge_rss_bytes_per_viewer":32000,"edge_us_per_frame":100,"gossip_bytes_per_vote":22,"gossip_bytes_per_s_per_full_node":{"polls_1":463},"ack_ms":{"rate":1500,"p50":14,"p99":98,"full_cores_busy":0.3},"merge_add_records_per_s":7e5,"merge_result_records_per_s":1e7}`
	if _, err := ReadFigures(strings.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{strings.Replace(good, `"full_us_per_relay_message":1400,`, "", 1), strings.Replace(good, `"full_idle_cores":0.02`, `"full_idle_cores":100`, 1),
		strings.Replace(good, `"p99":98`, `"p99":9`, 1), good + `{"b":2}`} {
		if _, err := ReadFigures(strings.NewReader(in)); !errors.Is(err, ErrInput) {
			t.Errorf("figures %q: %v", in[len(in)-60:], err)
		}
	}
	for _, in := range []string{"", "{", "null", `{"full_us_per_relayed_vote":0}`, `{"edge_us_per_frame":-1}`, strings.Repeat("[", 1<<21)} {
		if _, err := ReadFigures(strings.NewReader(in)); !errors.Is(err, ErrInput) {
			t.Errorf("figures %.20q: %v", in, err)
		}
	}
}

// FuzzReadFigures: any bytes are refused or give figures the model plans
// from without NaN.
func FuzzReadFigures(f *testing.F) {
	f.Add(`{"full_us_per_relayed_vote":25,"edge_us_per_socket_vote":80,"edge_us_per_frame":14,"edge_rss_bytes_per_viewer":25000,"full_rss_bytes_per_vote":600,"merge_add_records_per_s":7e5,"merge_result_records_per_s":1e7,"relay_bytes_per_vote":400}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, in string) {
		fig, err := ReadFigures(strings.NewReader(in))
		if err != nil {
			return
		}
		p, err := Make(seedNight(), fig)
		if err != nil {
			return
		}
		if math.IsNaN(p.AckP99) || math.IsNaN(p.Certify) || p.Edge.Count < 1 || p.Full.Count < 1 {
			t.Fatalf("plan from %q: %+v", in, p)
		}
	})
}

// At the counts Make chose, At gives Make's figures; other counts move
// them the way the formulas say (more edges: less CPU each); counts out
// of range are refused.
func TestAtIsMakeAtItsCounts(t *testing.T) {
	n, f := seedNight(), testFigures()
	p, err := Make(n, f)
	if err != nil {
		t.Fatal(err)
	}
	a, err := At(n, f, p.Full.Count, p.Edge.Count)
	if err != nil {
		t.Fatal(err)
	}
	if a.Edge != p.Edge || a.Full != p.Full || a.AckP99 != p.AckP99 || a.Certify != p.Certify || a.GossipBytes != p.GossipBytes {
		t.Fatalf("At at Make's counts: %+v\nMake: %+v", a, p)
	}
	more, err := At(n, f, p.Full.Count, p.Edge.Count*2)
	if err != nil || !(more.Edge.Cores < a.Edge.Cores) || more.Edge.Count != 2*p.Edge.Count {
		t.Fatalf("twice the edges: %+v %v", more.Edge, err)
	}
	// Counts past their machines come back whole, with why.
	if p, err := At(n, f, 1, 1); !errors.Is(err, ErrDoesNotFit) || p.Edge.Count != 1 || !(p.Edge.Cores > n.Cores) {
		t.Fatalf("one edge a region for 5,000,000 viewers: %+v %v, want the plan and ErrDoesNotFit", p.Edge, err)
	}
	for _, c := range [][2]int{{0, 1}, {1, 0}, {65, 1}, {1, 10_001}, {-1, -1}} {
		if _, err := At(n, f, c[0], c[1]); !errors.Is(err, ErrInput) {
			t.Fatalf("At(%d full, %d edges): %v, want ErrInput", c[0], c[1], err)
		}
	}
}

// Each member of the cluster (every process of every region) adds its
// per-member cost to every process; a negative per-member figure is
// refused.
func TestMembersCostEveryProcess(t *testing.T) {
	n, f := seedNight(), testFigures()
	base, err := At(n, f, 2, 10)
	if err != nil {
		t.Fatal(err)
	}
	f.PerMember.FullCores, f.PerMember.EdgeCores, f.PerMember.FullRSS, f.PerMember.EdgeRSS, f.PerMember.Gossip = 0.001, 0.002, 1e5, 2e5, 30
	p, err := At(n, f, 2, 10)
	if err != nil {
		t.Fatal(err)
	}
	const members = 3 * (2 + 10)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9*max(1, math.Abs(b)) }
	if !near(p.Full.Cores-base.Full.Cores, members*0.001) || !near(p.Edge.Cores-base.Edge.Cores, members*0.002) ||
		!near(p.Full.RSS-base.Full.RSS, members*1e5) || !near(p.Edge.RSS-base.Edge.RSS, members*2e5) || !near(p.GossipBytes-base.GossipBytes, members*30) {
		t.Fatalf("with per-member costs: %+v\nwithout: %+v", p, base)
	}
	good := `{"full_idle_cores":0.02,"edge_idle_cores":0.02,"full_base_rss_bytes":4e7,"edge_base_rss_bytes":4e7,"full_us_per_relay_message":1400,"full_us_per_relayed_vote":28,"edge_us_per_socket_vote":215,"relay_bytes_per_vote":286,"full_rss_bytes_per_vote":1100,"edge_rss_bytes_per_viewer":32000,"edge_us_per_frame":100,"gossip_bytes_per_vote":22,"gossip_bytes_per_s_per_full_node":{"polls_1":463},"ack_ms":{"rate":1500,"p50":14,"p99":98,"full_cores_busy":0.3},"merge_add_records_per_s":7e5,"merge_result_records_per_s":1e7`
	if _, err := ReadFigures(strings.NewReader(good + `,"per_member":{"edge_cores":-0.1}}`)); !errors.Is(err, ErrInput) {
		t.Fatalf("a negative per-member figure: %v", err)
	}
	if _, err := ReadFigures(strings.NewReader(good + `,"per_member":{"edge_cores":0.001}}`)); err != nil {
		t.Fatal(err)
	}
	// A misspelt figure is refused, not read as zero.
	if _, err := ReadFigures(strings.NewReader(good + `,"per_member":{"edge_core":0.001}}`)); !errors.Is(err, ErrInput) {
		t.Fatalf("a misspelt per-member figure: %v", err)
	}
	if _, err := ReadFigures(strings.NewReader(good + `,"full_us_per_relay_mesage":1}`)); !errors.Is(err, ErrInput) {
		t.Fatalf("a misspelt figure: %v", err)
	}
}

// With two copies (the default) a region plans two full nodes at least,
// each the other's buddy in the region; the copy costs the buddy's CPU,
// bytes on the link and the copy's time on the ack. One full node is
// planned only with one copy; given one, its buddy is in another region
// and every ack waits the cross-region round trip; one region with one
// full node has no buddy at all.
func TestTwoCopiesPlanABuddyInTheRegion(t *testing.T) {
	n, f := seedNight(), testFigures()
	f.CopyPerVoteUs, f.CopyBytesPerVote, f.Copy.P50, f.Copy.P99 = 6, 350, 1, 4
	n.RegionRTT = time.Millisecond
	n.AckCopies = 1
	one, err := Make(n, f)
	if err != nil {
		t.Fatal(err)
	}
	n.AckCopies = 0 // the default: 2
	two, err := Make(n, f)
	if err != nil {
		t.Fatal(err)
	}
	if one.Full.Count != 1 || two.Full.Count < 2 || two.CopyLinkBytes <= 0 || one.CopyLinkBytes != 0 {
		t.Fatalf("full nodes: %d with one copy, %d with two (copy link %.0f B/s)", one.Full.Count, two.Full.Count, two.CopyLinkBytes)
	}
	if d := two.AckP50 - one.AckP50; math.Abs(d-(f.Copy.P50+1)) > 1e-9 {
		t.Fatalf("the copy adds %.2f ms to the ack p50, want the copy's %.0f ms and the region's round trip", d, f.Copy.P50)
	}
	alone, err := At(n, f, 1, two.Edge.Count)
	if err != nil && !errors.Is(err, ErrDoesNotFit) {
		t.Fatal(err)
	}
	if cross := float64(n.CrossRTT / time.Millisecond); alone.AckP50 < one.AckP50+cross {
		t.Fatalf("one full node a region copies across regions: ack p50 %.0f ms, want %.0f ms and more", alone.AckP50, one.AckP50+cross)
	}
	var b strings.Builder
	two.Write(&b)
	if !strings.Contains(b.String(), "every vote on 2 machines, the buddy in its region") {
		t.Fatalf("the plan does not say where the copy is:\n%s", b.String())
	}
	n.Regions = 1
	if _, err := At(n, f, 1, 1); !errors.Is(err, ErrInput) {
		t.Fatalf("one full node in one region with two copies: %v, want ErrInput", err)
	}
	n.AckCopies = 3
	if _, err := Make(n, f); !errors.Is(err, ErrInput) {
		t.Fatalf("ack copies 3: %v", err)
	}
}
