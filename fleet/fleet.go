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

	FullIdleCores            float64 `json:"full_idle_cores"`
	EdgeIdleCores            float64 `json:"edge_idle_cores"`
	FullBaseRSS              float64 `json:"full_base_rss_bytes"`
	EdgeBaseRSS              float64 `json:"edge_base_rss_bytes"`
	FullPerMessageUs         float64 `json:"full_us_per_relay_message"`
	FullPerVoteUs            float64 `json:"full_us_per_relayed_vote"`
	EdgePerVoteUs            float64 `json:"edge_us_per_socket_vote"`
	RelayBytesPerVote        float64 `json:"relay_bytes_per_vote"`
	FullRSSPerVote           float64 `json:"full_rss_bytes_per_vote"`
	EdgeRSSPerViewer         float64 `json:"edge_rss_bytes_per_viewer"`
	EdgePerFrameUs           float64 `json:"edge_us_per_frame"`
	GossipBallotBytesPerVote float64 `json:"gossip_bytes_per_vote"`
	Gossip                   struct {
		Polls1  float64 `json:"polls_1"`
		Polls11 float64 `json:"polls_11"`
	} `json:"gossip_bytes_per_s_per_full_node"`
	Ack struct {
		Rate      float64 `json:"rate"`
		P50       float64 `json:"p50"`
		P99       float64 `json:"p99"`
		FullCores float64 `json:"full_cores_busy"`
	} `json:"ack_ms"`
	MergeRecordsPerS float64 `json:"merge_records_per_s"`
}

// ReadFigures decodes and checks a figures file.
func ReadFigures(r io.Reader) (Figures, error) {
	var f Figures
	dec := json.NewDecoder(io.LimitReader(r, 1<<20))
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("%w: figures: %w", ErrInput, err)
	}
	for name, v := range map[string]float64{
		"full_us_per_relayed_vote": f.FullPerVoteUs, "edge_us_per_socket_vote": f.EdgePerVoteUs, "edge_us_per_frame": f.EdgePerFrameUs,
		"edge_rss_bytes_per_viewer": f.EdgeRSSPerViewer, "full_rss_bytes_per_vote": f.FullRSSPerVote, "merge_records_per_s": f.MergeRecordsPerS,
		"relay_bytes_per_vote": f.RelayBytesPerVote,
	} {
		if !(v > 0) || math.IsInf(v, 0) {
			return f, fmt.Errorf("%w: figures: %s is %v: want a measured value above 0 (rerun ./bench/fleet-figures.sh)", ErrInput, name, v)
		}
	}
	return f, nil
}

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
}

// Relay window and batch size (relay package defaults).
const (
	relayWindow = 2 * time.Millisecond
	relayBatch  = 256
)

// Process is one kind of process of the plan at the peak.
type Process struct {
	Count int     // per region
	Cores float64 // each
	RSS   float64 // bytes each
}

// Plan is the model's fleet for a night.
type Plan struct {
	Night           Night
	Full, Edge      Process
	VotesPerEdge    float64 // a second, at the peak
	ViewersPerEdge  float64
	MessagesPerS    float64 // relay messages a full node answers a second
	VotesPerMessage float64
	RelayLinkBytes  float64 // bytes a second on one edge → full node link (both ways)
	GossipBytes     float64 // bytes a second a full node sends to the others (counts and ballots)
	AckP50, AckP99  float64 // ms
	FreshP99        float64 // ms: a vote's effect on every viewer's screen
	Certify         float64 // seconds after close + grace
	Headroom        float64 // share of the busiest resource left at the peak
	Limit           string  // what sets the counts
}

// Make plans the fleet for n from f. The formulas are in docs/capacity.md.
func Make(n Night, f Figures) (Plan, error) {
	if err := n.check(); err != nil {
		return Plan{}, err
	}
	p := Plan{Night: n}
	R := float64(n.Regions)
	votes := n.Burst / R     // a region's votes a second at the peak
	viewers := n.Viewers / R // a region's viewers
	fps := 1 / n.Tick.Seconds()

	// Edges: CPU for socket votes and frames, memory for viewers, a file
	// per socket.
	edgeCores := votes*f.EdgePerVoteUs/1e6 + viewers*fps*f.EdgePerFrameUs/1e6
	edgeMem := viewers * f.EdgeRSSPerViewer
	byCPU := edgeCores / (n.Cores*n.Busy - f.EdgeIdleCores)
	byMem := edgeMem / (n.Memory*n.Busy - f.EdgeBaseRSS)
	byFiles := viewers / n.Files
	e := math.Ceil(max(byCPU, byMem, byFiles, 1))
	p.Limit = "edges by CPU"
	switch max(byCPU, byMem, byFiles) {
	case byMem:
		p.Limit = "edges by memory"
	case byFiles:
		p.Limit = "edges by open files"
	}
	p.Edge = Process{Count: int(e), Cores: f.EdgeIdleCores + edgeCores/e, RSS: f.EdgeBaseRSS + edgeMem/e}
	p.VotesPerEdge, p.ViewersPerEdge = votes/e, viewers/e

	// Full nodes: each edge sends each of the F full nodes its share of
	// its votes, a message per relay window or per full batch.
	var full Process
	for F := 1.0; ; F++ {
		perLink := votes / e / F
		msgs := max(perLink/relayBatch, min(perLink, 1/relayWindow.Seconds())) // per edge → full link
		p.MessagesPerS = msgs * e
		p.VotesPerMessage = perLink / max(msgs, 1e-9)
		cores := f.FullIdleCores + (p.MessagesPerS*f.FullPerMessageUs+votes/F*f.FullPerVoteUs)/1e6
		full = Process{Count: int(F), Cores: cores, RSS: f.FullBaseRSS + n.Votes*f.FullRSSPerVote}
		if cores <= n.Cores*n.Busy || F >= 64 {
			break
		}
	}
	p.Full = full
	if float64(full.Count) > 1 && full.Cores > p.Edge.Cores {
		p.Limit = "full nodes by CPU"
	}
	perLink := votes / e / float64(full.Count)
	p.RelayLinkBytes = perLink * f.RelayBytesPerVote
	// Every full node publishes its own votes' ballots and counts to every
	// other region; the count entries' flat rate is the one-poll figure.
	p.GossipBytes = f.Gossip.Polls1 + votes/float64(full.Count)*f.GossipBallotBytesPerVote

	// Ack: the measured light-load ack, plus the round trip, stretched as
	// a queue's wait is by the full node's busy share (M/M/1: 1/(1-ρ)).
	rhoMeasured := min(f.Ack.FullCores/2, 0.95) // the figures' machine has 2 cores
	rho := min(full.Cores/n.Cores, 0.95)
	rtt := float64(n.RTT) / float64(time.Millisecond)
	p.AckP50 = f.Ack.P50 + rtt
	p.AckP99 = f.Ack.P99*(1-rhoMeasured)/(1-rho) + rtt
	// Freshness: a vote waits for the next gossip publication (100 ms),
	// crosses to the farthest region (half a round trip), then for the
	// next tick of the viewer's hub; the frame's write is the edge's.
	p.FreshP99 = 100 + float64(n.CrossRTT)/float64(time.Millisecond)/2 + float64(n.Tick)/float64(time.Millisecond) + p.AckP99/2
	// Certification: settle, the last second's records of the other
	// regions fetched, then the merge of every record at one node.
	tail := n.Burst * (R - 1) / R
	p.Certify = n.Settle.Seconds() + tail/f.MergeRecordsPerS + n.Votes/f.MergeRecordsPerS + float64(n.CrossRTT)/float64(time.Second)

	p.Headroom = 1 - max(p.Edge.Cores/n.Cores, p.Edge.RSS/n.Memory, full.Cores/n.Cores, full.RSS/n.Memory)
	if full.RSS > n.Memory*n.Busy {
		p.Limit = "full node memory: every full node holds every vote's ballot and record copy"
	}
	return p, nil
}

func (n Night) check() error {
	for name, v := range map[string]float64{"votes": n.Votes, "burst": n.Burst, "viewers": n.Viewers, "cores": n.Cores, "memory": n.Memory, "files": n.Files} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%w: %s %v: want a number, 0 or more", ErrInput, name, v)
		}
	}
	switch {
	case n.Regions < 1 || n.Regions > 64:
		return fmt.Errorf("%w: regions %d: want 1-64", ErrInput, n.Regions)
	case n.Cores < 1:
		return fmt.Errorf("%w: cores %v: want at least 1 per machine", ErrInput, n.Cores)
	case n.Memory < 1<<30:
		return fmt.Errorf("%w: memory %v bytes: want at least 1 GiB per machine", ErrInput, n.Memory)
	case n.Tick < 50*time.Millisecond || n.Tick > 2*time.Second:
		return fmt.Errorf("%w: tick %v: want 50ms-2s (the node's --tick .. --max-tick)", ErrInput, n.Tick)
	case !(n.Busy > 0 && n.Busy <= 1):
		return fmt.Errorf("%w: busy %v: want a share above 0, at most 1", ErrInput, n.Busy)
	case n.Files < 100:
		return fmt.Errorf("%w: files %v: want at least 100 sockets a process", ErrInput, n.Files)
	case n.Window <= 0:
		return fmt.Errorf("%w: window %v: want a duration above 0", ErrInput, n.Window)
	case n.Burst < n.Votes/n.Window.Seconds():
		return fmt.Errorf("%w: burst %v votes/s is below the window's average %.0f", ErrInput, n.Burst, n.Votes/n.Window.Seconds())
	}
	return nil
}

// Write prints the plan.
func (p Plan) Write(w io.Writer) {
	n := p.Night
	fmt.Fprintf(w, "night: %.0f votes in %v (average %.0f/s, burst %.0f/s), %.0f viewers, %d regions; machines of %.0f cores and %.1f GiB, tick %v, %.0f%% busy at the peak\n",
		n.Votes, n.Window, n.Votes/n.Window.Seconds(), n.Burst, n.Viewers, n.Regions, n.Cores, n.Memory/(1<<30), n.Tick, n.Busy*100)
	fmt.Fprintf(w, "per region: %d full node(s), %d edge(s)   (whole fleet: %d full nodes, %d edges; %s)\n",
		p.Full.Count, p.Edge.Count, p.Full.Count*n.Regions, p.Edge.Count*n.Regions, p.Limit)
	fmt.Fprintf(w, "  edge at the peak: %.0f votes/s, %.0f viewers, %.2f cores, %.2f GiB RSS\n", p.VotesPerEdge, p.ViewersPerEdge, p.Edge.Cores, p.Edge.RSS/(1<<30))
	fmt.Fprintf(w, "  full node at the peak: %.0f relay messages/s of %.1f votes, %.2f cores, %.2f GiB RSS\n", p.MessagesPerS, p.VotesPerMessage, p.Full.Cores, p.Full.RSS/(1<<30))
	fmt.Fprintf(w, "  NATS: %.2f MB/s on each edge → full node link; gossip %.2f MB/s from each full node to each other region\n", p.RelayLinkBytes/1e6, p.GossipBytes/1e6)
	fmt.Fprintf(w, "predicted: ack p50 %.0f ms, p99 %.0f ms; every viewer updated within %.0f ms (p99); certified %.1f s after close + grace\n",
		p.AckP50, p.AckP99, p.FreshP99, p.Certify)
	fmt.Fprintf(w, "headroom at the peak: %.0f%% of the busiest resource\n", p.Headroom*100)
}
