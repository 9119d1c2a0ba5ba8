package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"tally/fleet"
)

// figuresPath is the model's per-process figures (bench/fleet-figures.sh),
// relative to the repository's root, where night.sh runs.
const figuresPath = "bench/fleet/figures.json"

// besideModel prints, for --edges, what the processes did while the votes
// came beside what the fleet model (tally fleet plan's formulas,
// docs/capacity.md) predicts for the same processes at the same load: a
// full node and cl.edges a region, the night's mean vote rate, its
// viewers and their frames a second. The model gives each process a
// machine of its own; here they share two cores with the generator and
// the viewers, so its latencies are the least comparable.
func besideModel(p *plan, outs []outcome, took time.Duration, vw *viewers, nviewers int64, pr *prober, certified []time.Duration,
	cl *cluster, busy map[*region]float64) error {
	f, err := readFigures()
	if err != nil {
		return err
	}
	connected := nviewers - vw.failed.Load()
	fps := float64(vw.frames.Load()) / float64(max(connected, 1)) / took.Seconds()
	tick := time.Duration(float64(time.Second) / max(fps, 0.5))
	tick = min(max(tick, 50*time.Millisecond), 2*time.Second)
	rate := float64(len(outs)) / took.Seconds()
	n := fleet.Night{Votes: float64(len(outs)), Window: took, Burst: rate, Viewers: float64(connected), Regions: len(cl.regions),
		Cores: 2, Memory: 24 << 30, Tick: tick, Busy: 1, Files: 20_000, Settle: 250 * time.Millisecond} // the node's --certify-settle
	edges := len(cl.edges[0])
	// On two cores these processes do not fit the model's machines (a
	// machine each): the figures are what they would need, all the same.
	plan, err := fleet.At(n, f, 1, edges)
	if err != nil && !errors.Is(err, fleet.ErrDoesNotFit) {
		return err
	}
	var fullCPU, edgeCPU, fullRSS, edgeRSS float64
	for _, r := range cl.regions {
		fullCPU += busy[r]
		fullRSS += procUsage(r.cmd.Process.Pid).peakMB
	}
	for _, rs := range cl.edges {
		for _, r := range rs {
			edgeCPU += busy[r]
			edgeRSS += procUsage(r.cmd.Process.Pid).peakMB
		}
	}
	nf, ne := float64(len(cl.regions)), float64(len(cl.regions)*edges)
	var lat []time.Duration
	for _, o := range outs {
		lat = append(lat, o.lat)
	}
	slices.Sort(lat)
	slices.Sort(pr.lat)
	fmt.Println()
	fmt.Printf("beside the model (%s, measured %s) for the same processes: %d full node and %d edges a region at this night's mean %.0f votes/s, %d viewers, %.1f frames/s each\n",
		figuresPath, f.Measured, 1, edges, rate, connected, fps)
	fmt.Println()
	fmt.Println("| figure | measured | model | off by |")
	fmt.Println("| --- | ---: | ---: | ---: |")
	row := func(name string, measured, model float64, unit string) {
		fmt.Printf("| %s | %.3g %s | %.3g %s | %+.0f%% |\n", name, measured, unit, model, unit, (measured-model)/model*100)
	}
	row("full node CPU while the votes came (mean)", fullCPU/nf/took.Seconds(), plan.Full.Cores, "cores")
	row("edge CPU while the votes came (mean)", edgeCPU/ne/took.Seconds(), plan.Edge.Cores, "cores")
	row("full node peak RSS (mean)", fullRSS/nf, plan.Full.RSS/1e6, "MB")
	row("edge peak RSS (mean)", edgeRSS/ne, plan.Edge.RSS/1e6, "MB")
	row("ack p99 (every request)", float64(q(lat, 0.99).Microseconds())/1000, plan.AckP99, "ms")
	if len(pr.lat) > 0 {
		row("vote to viewer p99 (probes)", float64(q(pr.lat, 0.99).Microseconds())/1000, plan.FreshP99, "ms")
	}
	row("close + grace → certified at every region", slices.Max(certified).Seconds(), plan.Certify, "s")
	return nil
}

func readFigures() (fleet.Figures, error) {
	file, err := os.Open(figuresPath)
	if err != nil {
		return fleet.Figures{}, fmt.Errorf("%w (run from the repository's root; ./bench/fleet-figures.sh writes it)", err)
	}
	defer file.Close()
	return fleet.ReadFigures(file)
}
