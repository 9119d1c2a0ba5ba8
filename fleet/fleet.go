package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// ErrInput is returned for a night or figures the model cannot plan from.
var ErrInput = errors.New("fleet: bad input")

// Figures are the per-process costs measured on one machine by
// bench/fleet-figures.sh (its JSON, field for field).
type Figures struct {
	Measured string `json:"measured"`
	Machine  string `json:"machine"`
	Command  string `json:"command"`
	// What the script also records, for the reader; the model reads none.
	VotesPerRelayMessage json.RawMessage `json:"votes_per_relay_message"`
	AckHigh              json.RawMessage `json:"ack_ms_high"`
	ViewersMeasured      json.RawMessage `json:"viewers_measured"`

	FullIdleCores     float64 `json:"full_idle_cores"`
	EdgeIdleCores     float64 `json:"edge_idle_cores"`
	FullBaseRSS       float64 `json:"full_base_rss_bytes"`
	EdgeBaseRSS       float64 `json:"edge_base_rss_bytes"`
	FullPerMessageUs  float64 `json:"full_us_per_relay_message"`
	FullPerVoteUs     float64 `json:"full_us_per_relayed_vote"`
	EdgePerVoteUs     float64 `json:"edge_us_per_socket_vote"`
	RelayBytesPerVote float64 `json:"relay_bytes_per_vote"`
	// The edge's CPU and the relay's bytes per relay message, beside their
	// per-vote parts (0, or absent: all of it per vote).
	EdgePerMessageUs         float64 `json:"edge_us_per_relay_message"`
	RelayBytesPerMessage     float64 `json:"relay_bytes_per_message"`
	FullRSSPerVote           float64 `json:"full_rss_bytes_per_vote"`
	EdgeRSSPerViewer         float64 `json:"edge_rss_bytes_per_viewer"`
	EdgePerFrameUs           float64 `json:"edge_us_per_frame"`
	GossipBallotBytesPerVote float64 `json:"gossip_bytes_per_vote"`
	// GossipVoting is what a full node publishes a second while votes flow
	// beyond the per-vote bytes (the deltas' publications); 0 or absent:
	// nothing.
	GossipVoting float64 `json:"gossip_bytes_per_s_voting"`
	Gossip       struct {
		Polls1  float64 `json:"polls_1"`
		Polls11 float64 `json:"polls_11"`
	} `json:"gossip_bytes_per_s_per_full_node"`
	Ack struct {
		Rate      float64 `json:"rate"`
		P50       float64 `json:"p50"`
		P99       float64 `json:"p99"`
		FullCores float64 `json:"full_cores_busy"`
	} `json:"ack_ms"`
	// PerMember is what each member of the cluster (every full node and
	// edge, every region: memberlist is one cluster) costs a process at
	// rest: probes and push/pull, its state, a NATS leaf connection. 0
	// (or absent): nothing.
	PerMember struct {
		MembersAdded float64 `json:"members_added"` // how many joined to measure them
		FullCores    float64 `json:"full_cores"`
		EdgeCores    float64 `json:"edge_cores"`
		FullRSS      float64 `json:"full_rss_bytes"`
		EdgeRSS      float64 `json:"edge_rss_bytes"`
		Gossip       float64 `json:"gossip_bytes_per_s"`
	} `json:"per_member"`
	// The certifier's incremental merge (ledger.Merge): records fed to it
	// a second (the tail read at close), and records a second its result
	// at close covers.
	MergeAddRecordsPerS    float64 `json:"merge_add_records_per_s"`
	MergeResultRecordsPerS float64 `json:"merge_result_records_per_s"`
	// The second copy (--ack-copies 2, bench/copies.sh): the CPU a vote's
	// copy costs its region's full nodes (the primary's send and the
	// buddy's store: both full nodes' CPU per vote with two copies less
	// with one), the bytes a copied vote costs on the primary → buddy
	// link, and the copy's own time (from the primary's fsync to the
	// buddy's, on loopback). 0 or absent: nothing.
	CopyPerVoteUs    float64 `json:"copy_us_per_vote"`
	CopyBytesPerVote float64 `json:"copy_bytes_per_vote"`
	Copy             struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"copy_ms"`
}

// ReadFigures decodes and checks a figures file: one JSON object, every
// figure the formulas use measured (above zero), finite and within reason.
func ReadFigures(r io.Reader) (Figures, error) {
	var f Figures
	dec := json.NewDecoder(io.LimitReader(r, 1<<20))
	dec.DisallowUnknownFields() // a misspelt figure is an error, not a zero
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("%w: figures: %w", ErrInput, err)
	}
	if dec.More() {
		return f, fmt.Errorf("%w: figures: more than one JSON value", ErrInput)
	}
	for _, c := range []struct {
		name string
		v    float64
		max  float64
	}{
		{"full_idle_cores", f.FullIdleCores, 2}, {"edge_idle_cores", f.EdgeIdleCores, 2},
		{"full_base_rss_bytes", f.FullBaseRSS, 1 << 36}, {"edge_base_rss_bytes", f.EdgeBaseRSS, 1 << 36},
		{"full_us_per_relay_message", f.FullPerMessageUs, 1e6}, {"full_us_per_relayed_vote", f.FullPerVoteUs, 1e6},
		{"edge_us_per_socket_vote", f.EdgePerVoteUs, 1e6}, {"relay_bytes_per_vote", f.RelayBytesPerVote, 1 << 20},
		{"full_rss_bytes_per_vote", f.FullRSSPerVote, 1 << 20}, {"edge_rss_bytes_per_viewer", f.EdgeRSSPerViewer, 1 << 24},
		{"edge_us_per_frame", f.EdgePerFrameUs, 1e6}, {"gossip_bytes_per_vote", f.GossipBallotBytesPerVote, 1 << 20},
		{"gossip_bytes_per_s_per_full_node.polls_1", f.Gossip.Polls1, 1 << 30},
		{"ack_ms.rate", f.Ack.Rate, 1e9}, {"ack_ms.p50", f.Ack.P50, 1e6}, {"ack_ms.p99", f.Ack.P99, 1e6},
		{"ack_ms.full_cores_busy", f.Ack.FullCores, 2}, {"merge_add_records_per_s", f.MergeAddRecordsPerS, 1e12}, {"merge_result_records_per_s", f.MergeResultRecordsPerS, 1e12},
	} {
		if !(c.v > 0 && c.v < c.max) {
			return f, fmt.Errorf("%w: figures: %s is %g: want a measured value above 0 and below %g (rerun ./bench/fleet-figures.sh)", ErrInput, c.name, c.v, c.max)
		}
	}
	for _, c := range []struct {
		name string
		v    float64
		max  float64
	}{
		{"per_member.members_added", f.PerMember.MembersAdded, 1e6},
		{"per_member.full_cores", f.PerMember.FullCores, 1}, {"per_member.edge_cores", f.PerMember.EdgeCores, 1},
		{"per_member.full_rss_bytes", f.PerMember.FullRSS, 1 << 30}, {"per_member.edge_rss_bytes", f.PerMember.EdgeRSS, 1 << 30},
		{"per_member.gossip_bytes_per_s", f.PerMember.Gossip, 1 << 30},
		{"edge_us_per_relay_message", f.EdgePerMessageUs, 1e6}, {"relay_bytes_per_message", f.RelayBytesPerMessage, 1 << 20},
		{"gossip_bytes_per_s_voting", f.GossipVoting, 1 << 30},
		{"copy_us_per_vote", f.CopyPerVoteUs, 1e6}, {"copy_bytes_per_vote", f.CopyBytesPerVote, 1 << 20},
		{"copy_ms.p50", f.Copy.P50, 1e6}, {"copy_ms.p99", f.Copy.P99, 1e6},
	} {
		if !(c.v >= 0 && c.v < c.max) {
			return f, fmt.Errorf("%w: figures: %s is %g: want 0 or more and below %g (rerun ./bench/fleet-figures.sh)", ErrInput, c.name, c.v, c.max)
		}
	}
	if f.Ack.P99 < f.Ack.P50 {
		return f, fmt.Errorf("%w: figures: ack_ms.p99 %g is below its p50 %g", ErrInput, f.Ack.P99, f.Ack.P50)
	}
	return f, nil
}

// figuresCores is the core count of the machine bench/fleet-figures.sh
// ran on: the ack's busy share is measured against it.
const figuresCores = 2

// Night is what a broadcaster plans for.
type Night struct {
	Votes   float64       // votes in the window
	Window  time.Duration // how long voting lasts
	Burst   float64       // votes a second at the peak, the whole cluster
	Viewers float64       // viewers at the peak, the whole cluster
	Regions int
	Cores   float64 // per machine
	Memory  float64 // bytes per machine
	Tick    time.Duration
	// Busy is the share of a machine's cores and memory the plan fills at
	// the peak (the rest is headroom); 0.6 leaves 40%.
	Busy float64
	// Files is how many sockets a process may hold (its open-file limit).
	Files float64
	// RTT is a client's round trip to its edge plus the edge's to its
	// region's full node; CrossRTT the round trip between regions.
	RTT, CrossRTT time.Duration
	Settle        time.Duration // --certify-settle
	// AckCopies is the machines a vote is on before its ack (the nodes'
	// --ack-copies): 2, each full node's buddy in its own region, or 1;
	// 0: 2.
	AckCopies int
	// RegionRTT is the round trip between two machines of one region: a
	// copy's to the buddy.
	RegionRTT time.Duration
}

// Relay window bounds and batch size (relay package defaults); maxFull
// bounds the full nodes the model tries a region. At the peak an edge
// always has a batch in flight, so its window is about the full node's
// reply time (relay's pace), between the two bounds.
const (
	maxFull        = 64
	relayWindow    = 2 * time.Millisecond
	relayMaxWindow = 20 * time.Millisecond
	relayBatch     = 256
)

// Process is one kind of process of the plan at the peak.
type Process struct {
	Count int     `json:"count"`     // per region
	Cores float64 `json:"cores"`     // each
	RSS   float64 `json:"rss_bytes"` // bytes each
}

// Plan is the model's fleet for a night. Its JSON (tally fleet plan
// --json) is snake_case, each unit in its key's name.
type Plan struct {
	Night           Night   `json:"night"`
	Full            Process `json:"full"`
	Edge            Process `json:"edge"`
	VotesPerEdge    float64 `json:"votes_per_s_per_edge"` // a second, at the peak
	ViewersPerEdge  float64 `json:"viewers_per_edge"`
	MessagesPerS    float64 `json:"relay_messages_per_s"` // relay messages a full node answers a second
	VotesPerMessage float64 `json:"votes_per_relay_message"`
	CopyLinkBytes   float64 `json:"copy_link_bytes_per_s"`  // bytes a second on one full node → buddy link (--ack-copies 2)
	RelayLinkBytes  float64 `json:"relay_link_bytes_per_s"` // bytes a second on one edge → full node link (both ways)
	GossipBytes     float64 `json:"gossip_bytes_per_s"`     // bytes a second a full node sends to the others (counts and ballots)
	AckP50          float64 `json:"ack_p50_ms"`
	AckP99          float64 `json:"ack_p99_ms"`
	FreshP99        float64 `json:"fresh_p99_ms"` // ms: a vote's effect on every viewer's screen
	Certify         float64 `json:"certify_s"`    // seconds after close + grace
	Headroom        float64 `json:"headroom"`     // share of the busiest resource left at the peak
	Limit           string  `json:"limit"`        // what sets the counts
}

// MarshalJSON writes the night snake_case, its durations in
// milliseconds (window_ms, tick_ms, ...) and its memory in bytes.
func (n Night) MarshalJSON() ([]byte, error) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return json.Marshal(struct {
		Votes       float64 `json:"votes"`
		WindowMs    float64 `json:"window_ms"`
		Burst       float64 `json:"burst_votes_per_s"`
		Viewers     float64 `json:"viewers"`
		Regions     int     `json:"regions"`
		Cores       float64 `json:"cores"`
		Memory      float64 `json:"memory_bytes"`
		TickMs      float64 `json:"tick_ms"`
		Busy        float64 `json:"busy"`
		Files       float64 `json:"files"`
		RTTMs       float64 `json:"rtt_ms"`
		CrossRTTMs  float64 `json:"cross_rtt_ms"`
		SettleMs    float64 `json:"settle_ms"`
		AckCopies   int     `json:"ack_copies"`
		RegionRTTMs float64 `json:"region_rtt_ms"`
	}{n.Votes, ms(n.Window), n.Burst, n.Viewers, n.Regions, n.Cores, n.Memory, ms(n.Tick), n.Busy, n.Files,
		ms(n.RTT), ms(n.CrossRTT), ms(n.Settle), n.copies(), ms(n.RegionRTT)})
}

// Make plans the fleet for n from f. The formulas are in docs/capacity.md.
func Make(n Night, f Figures) (Plan, error) {
	if err := n.check(); err != nil {
		return Plan{}, err
	}
	R := float64(n.Regions)
	votes := n.Burst / R     // a region's votes a second at the peak
	viewers := n.Viewers / R // a region's viewers
	fps := 1 / n.Tick.Seconds()

	// Edges: CPU for socket votes and frames, memory for viewers, a file
	// per socket.
	edgeCores := votes*f.EdgePerVoteUs/1e6 + viewers*fps*f.EdgePerFrameUs/1e6
	edgeMem := viewers * f.EdgeRSSPerViewer
	cpuShare, memShare := n.Cores*n.Busy-f.EdgeIdleCores, n.Memory*n.Busy-f.EdgeBaseRSS
	if cpuShare <= 0 || memShare <= 0 {
		return Plan{}, fmt.Errorf("%w: busy %g leaves an edge no room past its idle CPU and base memory", ErrDoesNotFit, n.Busy)
	}
	byCPU := edgeCores / cpuShare
	byMem := edgeMem / memShare
	byFiles := viewers / n.Files
	e := math.Ceil(max(byCPU, byMem, byFiles, 1))
	if !(e <= maxPerRegion) {
		return Plan{}, fmt.Errorf("%w: more than %d edges a region; plan bigger machines or fewer viewers a region", ErrDoesNotFit, maxPerRegion)
	}
	limit := "edges by CPU"
	switch max(byCPU, byMem, byFiles) {
	case byMem:
		limit = "edges by memory"
	case byFiles:
		limit = "edges by open files"
	}

	// Full nodes: as many as it takes for one to fit its share of a
	// machine (the relay's messages grow with edges × full nodes). Then
	// one edge more while an edge's relay messages take it past its
	// share (they depend on both counts).
	// With two copies a region has two full nodes at least, each the
	// other's buddy: one alone would copy across regions, and its every
	// ack would wait a cross-region round trip (with one region, it
	// would have no buddy at all).
	first := 1
	if n.copies() == 2 {
		first = 2
	}
	var p Plan
	for ; ; e++ {
		for F := first; ; F++ {
			p = at(n, f, F, int(e))
			if p.Full.Cores <= n.Cores*n.Busy || F >= maxFull {
				break
			}
		}
		if p.Edge.Cores <= n.Cores*n.Busy || e >= maxPerRegion {
			break
		}
	}
	p.Limit = limit
	if p.Full.Count > 1 && p.Full.Cores > p.Edge.Cores {
		p.Limit = "full nodes by CPU"
	}
	if p.Full.RSS > n.Memory*n.Busy {
		p.Limit = "full node memory: every full node holds every vote's ballot and record copy"
	}
	return p, p.fits()
}

// At is the model's figures for n with the full nodes and edges a region
// given, instead of the counts Make would choose: what those processes
// should use at n's peak, to put beside what they did (bench/night
// --edges). A plan past its machines (a process over its share, more
// viewers than open files) comes back whole with an ErrDoesNotFit saying
// why.
func At(n Night, f Figures, full, edges int) (Plan, error) {
	if err := n.check(); err != nil {
		return Plan{}, err
	}
	if full < 1 || full > maxFull || edges < 1 || edges > maxPerRegion {
		return Plan{}, fmt.Errorf("%w: %d full node(s) and %d edge(s) a region: want 1-%d and 1-%d", ErrInput, full, edges, maxFull, maxPerRegion)
	}
	if n.copies() == 2 && full == 1 && n.Regions == 1 {
		return Plan{}, fmt.Errorf("%w: one full node in one region has no buddy for the second copy: plan 2, or ack-copies 1", ErrInput)
	}
	p := at(n, f, full, edges)
	p.Limit = "given"
	if p.ViewersPerEdge > n.Files {
		return p, fmt.Errorf("%w: %.0f viewers an edge, over its %g open files", ErrDoesNotFit, p.ViewersPerEdge, n.Files)
	}
	return p, p.fits()
}

// at applies the formulas (docs/capacity.md) to F full nodes and e edges
// a region.
func at(n Night, f Figures, F, e int) Plan {
	p := Plan{Night: n}
	R := float64(n.Regions)
	votes := n.Burst / R     // a region's votes a second at the peak
	viewers := n.Viewers / R // a region's viewers
	fps := 1 / n.Tick.Seconds()
	E, Ff := float64(e), float64(F)
	members := R * (E + Ff) // one memberlist cluster: every process of every region
	pm := f.PerMember

	edgeCores := votes*f.EdgePerVoteUs/1e6 + viewers*fps*f.EdgePerFrameUs/1e6
	edgeMem := viewers * f.EdgeRSSPerViewer
	p.Edge = Process{Count: e, Cores: f.EdgeIdleCores + members*pm.EdgeCores + edgeCores/E, RSS: f.EdgeBaseRSS + members*pm.EdgeRSS + edgeMem/E}
	p.VotesPerEdge, p.ViewersPerEdge = votes/E, viewers/E

	// Each edge sends each of the F full nodes its share of its votes, a
	// message per relay window or per full batch; the window is the
	// measured reply time (the light-load ack, and the copy's), bounded.
	reply := f.Ack.P50
	if n.copies() == 2 {
		reply += f.Copy.P50
	}
	window := min(max(reply/1e3, relayWindow.Seconds()), relayMaxWindow.Seconds())
	perLink := votes / E / Ff
	msgs := max(perLink/relayBatch, min(perLink, 1/window)) // per edge → full link
	p.MessagesPerS = msgs * E
	p.Edge.Cores += msgs * Ff * f.EdgePerMessageUs / 1e6
	p.VotesPerMessage = perLink / max(msgs, 1e-9)
	p.Full = Process{Count: F, Cores: f.FullIdleCores + members*pm.FullCores + (p.MessagesPerS*f.FullPerMessageUs+votes/Ff*f.FullPerVoteUs)/1e6,
		RSS: f.FullBaseRSS + members*pm.FullRSS + n.Votes*f.FullRSSPerVote}
	p.RelayLinkBytes = msgs*f.RelayBytesPerMessage + perLink*f.RelayBytesPerVote
	// The second copy: each full node holds its primary's votes (a region's
	// votes over its F full nodes), one message per ledger batch.
	copyRTT := 0.0
	if n.copies() == 2 {
		p.Full.Cores += votes / Ff * f.CopyPerVoteUs / 1e6
		p.CopyLinkBytes = votes / Ff * f.CopyBytesPerVote
		copyRTT = float64(n.RegionRTT) / float64(time.Millisecond)
		if F == 1 { // the buddy is in another region
			copyRTT = float64(n.CrossRTT) / float64(time.Millisecond)
		}
	}
	// Every full node publishes its own votes' ballots and counts to every
	// other region; the count entries' flat rate is the one-poll figure.
	p.GossipBytes = f.Gossip.Polls1 + members*pm.Gossip + votes/Ff*f.GossipBallotBytesPerVote
	if votes > 0 {
		p.GossipBytes += f.GossipVoting
	}

	// Ack: the measured light-load ack, plus the round trip, stretched as
	// a queue's wait is by the full node's busy share (M/M/1: 1/(1-ρ)).
	rhoMeasured := min(f.Ack.FullCores/figuresCores, 0.95)
	rho := min(p.Full.Cores/n.Cores, 0.95)
	rtt := float64(n.RTT) / float64(time.Millisecond)
	p.AckP50 = f.Ack.P50 + rtt
	p.AckP99 = f.Ack.P99*(1-rhoMeasured)/(1-rho) + rtt
	if n.copies() == 2 {
		p.AckP50 += f.Copy.P50 + copyRTT
		p.AckP99 += f.Copy.P99 + copyRTT
	}
	// Freshness: a vote waits for the next gossip publication (100 ms),
	// crosses to the farthest region (half a round trip), then for the
	// next tick of the viewer's hub; the frame's write is the edge's.
	p.FreshP99 = 100 + float64(n.CrossRTT)/float64(time.Millisecond)/2 + float64(n.Tick)/float64(time.Millisecond) + p.AckP99/2
	// Certification: settle, the last second's records of the other
	// regions fetched into the merge kept while the poll ran, then its
	// result over every record.
	tail := n.Burst * (R - 1) / R
	p.Certify = n.Settle.Seconds() + tail/f.MergeAddRecordsPerS + n.Votes/f.MergeResultRecordsPerS + float64(n.CrossRTT)/float64(time.Second)

	p.Headroom = 1 - max(p.Edge.Cores/n.Cores, p.Edge.RSS/n.Memory, p.Full.Cores/n.Cores, p.Full.RSS/n.Memory)
	return p
}

func (n Night) check() error {
	for _, c := range []struct {
		name      string
		v, lo, hi float64
	}{
		{"cores", n.Cores, 1, 1024}, {"votes", n.Votes, 0, 1e12}, {"burst", n.Burst, 0, 1e9}, {"viewers", n.Viewers, 0, 1e10},
		{"memory (GiB)", n.Memory / (1 << 30), 1, 1 << 16}, {"files", n.Files, 100, 1e8}, {"busy", n.Busy, 0.05, 1},
	} {
		if !(c.v >= c.lo && c.v <= c.hi) {
			return fmt.Errorf("%w: %s %g: want %g-%g", ErrInput, c.name, c.v, c.lo, c.hi)
		}
	}
	for _, c := range []struct {
		name string
		v    time.Duration
		hi   time.Duration
	}{{"rtt", n.RTT, time.Minute}, {"cross-rtt", n.CrossRTT, time.Minute}, {"region-rtt", n.RegionRTT, time.Minute}, {"settle", n.Settle, time.Hour}, {"window", n.Window, 24 * time.Hour}} {
		if c.v < 0 || c.v > c.hi {
			return fmt.Errorf("%w: %s %v: want 0-%v", ErrInput, c.name, c.v, c.hi)
		}
	}
	switch {
	case n.AckCopies < 0 || n.AckCopies > 2:
		return fmt.Errorf("%w: ack-copies %d: want 1 or 2 (0: 2)", ErrInput, n.AckCopies)
	case n.Regions < 1 || n.Regions > 64:
		return fmt.Errorf("%w: regions %d: want 1-64", ErrInput, n.Regions)
	case n.Tick < 50*time.Millisecond || n.Tick > 2*time.Second:
		return fmt.Errorf("%w: tick %v: want 50ms-2s (the node's --tick .. --max-tick)", ErrInput, n.Tick)
	case n.Window <= 0:
		return fmt.Errorf("%w: window %v: want a duration above 0", ErrInput, n.Window)
	case n.Burst < n.Votes/n.Window.Seconds():
		return fmt.Errorf("%w: burst %g votes/s is below the window's average %.0f", ErrInput, n.Burst, n.Votes/n.Window.Seconds())
	}
	return nil
}

// copies is AckCopies, its zero the default, 2.
func (n Night) copies() int {
	if n.AckCopies == 0 {
		return 2
	}
	return n.AckCopies
}

// ErrDoesNotFit is returned for a night no fleet of these machines holds
// within the model's bounds.
var ErrDoesNotFit = errors.New("fleet: does not fit")

// fits refuses a plan past the model's bounds: a process over its share
// of a machine, or more processes than the model plans.
func (p Plan) fits() error {
	n := p.Night
	switch {
	case p.Edge.Count > maxPerRegion:
		return fmt.Errorf("%w: more than %d edges a region (%d); plan bigger machines or fewer viewers a region", ErrDoesNotFit, maxPerRegion, p.Edge.Count)
	case p.Full.Cores > n.Cores*n.Busy:
		return fmt.Errorf("%w: %d full nodes a region still need %.1f cores each, over %.1f (busy %g of %g cores): the relay's messages grow with edges × full nodes", ErrDoesNotFit, p.Full.Count, p.Full.Cores, n.Cores*n.Busy, n.Busy, n.Cores)
	case p.Edge.Cores > n.Cores*n.Busy+1e-9 || p.Edge.RSS > n.Memory*n.Busy:
		return fmt.Errorf("%w: an edge needs %.1f cores and %.1f GiB, over its share (busy %g)", ErrDoesNotFit, p.Edge.Cores, p.Edge.RSS/(1<<30), n.Busy)
	case p.Full.RSS > n.Memory:
		return fmt.Errorf("%w: a full node needs %.1f GiB (every vote's ballot and record copy), over the machine's %.1f GiB", ErrDoesNotFit, p.Full.RSS/(1<<30), n.Memory/(1<<30))
	}
	for _, v := range []float64{p.Edge.Cores, p.Edge.RSS, p.Full.Cores, p.Full.RSS, p.AckP50, p.AckP99, p.FreshP99, p.Certify, p.Headroom, p.RelayLinkBytes, p.GossipBytes, p.CopyLinkBytes} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: the plan does not come out finite", ErrDoesNotFit)
		}
	}
	return nil
}

// maxPerRegion bounds the processes of one kind the model plans a region.
const maxPerRegion = 10_000

// Write prints the plan.
func (p Plan) Write(w io.Writer) {
	n := p.Night
	fmt.Fprintf(w, "night: %.0f votes in %v (average %.0f/s, burst %.0f/s), %.0f viewers, %d region(s); machines of %.0f cores and %.1f GiB, tick %v, %.0f%% busy at the peak\n",
		n.Votes, n.Window, n.Votes/n.Window.Seconds(), n.Burst, n.Viewers, n.Regions, n.Cores, n.Memory/(1<<30), n.Tick, n.Busy*100)
	fmt.Fprintf(w, "per region: %d full node(s), %d edge(s)   (whole fleet: %d full nodes, %d edges; %s)\n",
		p.Full.Count, p.Edge.Count, p.Full.Count*n.Regions, p.Edge.Count*n.Regions, p.Limit)
	fmt.Fprintf(w, "  edge at the peak: %.0f votes/s, %.0f viewers, %.2f cores, %.2f GiB RSS\n", p.VotesPerEdge, p.ViewersPerEdge, p.Edge.Cores, p.Edge.RSS/(1<<30))
	fmt.Fprintf(w, "  full node at the peak: %.0f relay messages/s of %.1f votes, %.2f cores, %.2f GiB RSS\n", p.MessagesPerS, p.VotesPerMessage, p.Full.Cores, p.Full.RSS/(1<<30))
	if n.Regions > 1 {
		fmt.Fprintf(w, "  NATS: %.2f MB/s on each edge → full node link; gossip %.2f MB/s from each full node to each other region\n", p.RelayLinkBytes/1e6, p.GossipBytes/1e6)
	} else {
		fmt.Fprintf(w, "  NATS: %.2f MB/s on each edge → full node link; gossip %.2f MB/s from each full node\n", p.RelayLinkBytes/1e6, p.GossipBytes/1e6)
	}
	switch {
	case n.copies() == 2 && p.Full.Count > 1:
		fmt.Fprintf(w, "  copies: every vote on 2 machines, the buddy in its region: %.2f MB/s on each full node → buddy link\n", p.CopyLinkBytes/1e6)
	case n.copies() == 2:
		fmt.Fprintf(w, "  copies: every vote on 2 machines, the buddy in another region (every ack waits a cross-region round trip): %.2f MB/s on each full node → buddy link\n", p.CopyLinkBytes/1e6)
	default:
		fmt.Fprintf(w, "  copies: every vote on 1 machine (--ack-copies 1): losing a full node's machine loses what it acknowledged\n")
	}
	fmt.Fprintf(w, "predicted: ack p50 %.0f ms, p99 %.0f ms; every viewer updated within %.0f ms (p99); certified %.1f s after close + grace\n",
		p.AckP50, p.AckP99, p.FreshP99, p.Certify)
	fmt.Fprintf(w, "headroom at the peak: %.0f%% of the busiest resource\n", p.Headroom*100)
}
