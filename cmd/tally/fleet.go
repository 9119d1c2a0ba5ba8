package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"tally/fleet"
)

// runFleet runs `tally fleet plan`: the capacity model's fleet for a night.
// It is long because it is one command read top to bottom: its flags,
// the measured figures, the plan and its table.
func runFleet(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || isHelp(args[0]) {
		w := stderr
		if len(args) > 0 {
			w = stdout
		}
		fmt.Fprint(w, "usage: tally fleet plan [flags]   (tally fleet plan --help lists them)\n")
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] != "plan" {
		fmt.Fprintf(stderr, "tally fleet: unknown subcommand %q (want plan)\n", args[0])
		return 2
	}
	fs := newFlags("tally fleet plan", "tally fleet plan [--votes N --window D --burst N --viewers N --regions N --cores N --memory GIB] [--full N --edges N] [--figures FILE] [--json]")
	figures := fs.String("figures", "", "a file of per-process figures measured by ./bench/fleet-figures.sh (default: the ones built in, bench/fleet/figures.json when it was built)")
	votes := fs.Float64("votes", 1_000_000, "votes in the window, the whole cluster")
	window := fs.Duration("window", 30*time.Second, "how long voting lasts")
	burst := fs.Float64("burst", 100_000, "votes a second at the peak, the whole cluster")
	viewers := fs.Float64("viewers", 5_000_000, "viewers at the peak, the whole cluster")
	regions := fs.Int("regions", 3, "regions (1-64), the load spread evenly over them")
	cores := fs.Float64("cores", 8, "cores per machine")
	memory := fs.Float64("memory", 32, "memory per machine, GiB")
	tick := fs.Duration("tick", time.Second, "the fan-out's tick at the peak (the node's --max-tick; it bends up to it under load)")
	busy := fs.Float64("busy", 0.6, "share of each machine's cores and memory the plan fills at the peak (the rest is headroom)")
	files := fs.Float64("files", 1_000_000, "sockets a process may hold (its open-file limit)")
	rtt := fs.Duration("rtt", 20*time.Millisecond, "a viewer's round trip to its edge plus the edge's to its full node")
	crossRTT := fs.Duration("cross-rtt", 200*time.Millisecond, "the round trip between the farthest regions")
	settle := fs.Duration("settle", 250*time.Millisecond, "the full nodes' --certify-settle")
	copies := fs.Int("ack-copies", 2, "machines a vote is on before its ack, as the nodes' --ack-copies: 2 (a buddy in each full node's region) or 1")
	regionRTT := fs.Duration("region-rtt", time.Millisecond, "the round trip between two machines of one region (a copy's to its buddy)")
	full := fs.Int("full", 0, "full nodes a region: with --edges, the model's figures for these counts instead of the ones it would choose (0: it chooses)")
	edges := fs.Int("edges", 0, "edges a region, with --full")
	asJSON := fs.Bool("json", false, "print the plan as JSON")
	if code, done := parseFlags(fs, args[1:], stdout, stderr); done {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	fig, source, err := readFleetFigures(*figures)
	if err != nil {
		fmt.Fprintf(stderr, "tally fleet plan: %v\n", err)
		return 2
	}
	if (*full == 0) != (*edges == 0) {
		return usageError(fs, stderr, "--full %d --edges %d: give both, each 1 or more (the counts to evaluate), or neither (the model chooses)", *full, *edges)
	}
	night := fleet.Night{
		Votes: *votes, Window: *window, Burst: *burst, Viewers: *viewers, Regions: *regions, Cores: *cores, Memory: *memory * (1 << 30),
		Tick: *tick, Busy: *busy, Files: *files, RTT: *rtt, CrossRTT: *crossRTT, Settle: *settle,
		AckCopies: *copies, RegionRTT: *regionRTT,
	}
	var plan fleet.Plan
	if *full != 0 {
		plan, err = fleet.At(night, fig, *full, *edges)
	} else {
		plan, err = fleet.Make(night, fig)
	}
	// Counts given that do not fit are still printed (what they would
	// need), then refused; a plan the model chose that does not fit is
	// not printed.
	if errors.Is(err, fleet.ErrDoesNotFit) && *full == 0 {
		fmt.Fprintf(stderr, "tally fleet plan: %v\n", err)
		return 1
	}
	if err != nil && !errors.Is(err, fleet.ErrDoesNotFit) {
		return usageError(fs, stderr, "%v", err)
	}
	defer func() {
		if err != nil {
			fmt.Fprintf(stderr, "tally fleet plan: --full %d --edges %d: %v\n", *full, *edges, err)
		}
	}()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(plan); err != nil {
			fmt.Fprintf(stderr, "tally fleet plan: %v\n", err)
			return 1
		}
	} else {
		fmt.Fprintf(stdout, "figures: %s (measured %s on %s)\n", source, fig.Measured, fig.Machine)
		plan.Write(stdout)
	}
	if err != nil {
		return 1
	}
	return 0
}

// readFleetFigures reads --figures: the file named, or without one the
// figures built into the binary (so the plan runs from any directory).
// It returns them and what to call them.
func readFleetFigures(name string) (fleet.Figures, string, error) {
	if name == "" {
		fig, err := fleet.Default()
		if err != nil {
			return fig, "", fmt.Errorf("the built-in figures: %v", err)
		}
		return fig, fleet.DefaultFiguresName, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return fleet.Figures{}, "", fmt.Errorf("--figures %s: %v (run ./bench/fleet-figures.sh to measure them)", name, errors.Unwrap(err))
	}
	defer f.Close()
	fig, err := fleet.ReadFigures(f)
	if err != nil {
		return fig, "", fmt.Errorf("--figures %s: %v", name, err)
	}
	return fig, name, nil
}
