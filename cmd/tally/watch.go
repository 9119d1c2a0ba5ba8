package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"tally/client"

	"github.com/coder/websocket"
)

func runWatch(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally watch", "tally watch [--url URL] [--poll ID]\n       tally watch --swarm N [--server-pid PID] [flags]")
	var url string
	urlVar(fs, &url, urlUsage)
	pollID := fs.String("poll", "demo", "poll to watch")
	swarm := fs.Int("swarm", 0, "open this many viewers and report delivery figures instead of printing the tally")
	perIP := fs.Int("per-ip", 100, "viewers per loopback source address (127.0.0.2, .3, …)")
	ramp := fs.Duration("ramp", 10*time.Second, "time to connect the swarm")
	duration := fs.Duration("duration", 20*time.Second, "how long to measure once connected")
	votesPerSec := fs.Float64("votes-per-sec", 40, "votes sent per second while measuring, so every tick has a change")
	serverPID := fs.Int("server-pid", 0, "the node's process id, to report its memory and CPU")
	sourceOffset := fs.Int("source-offset", 0, "skip this many source addresses (so several swarms use different ones)")
	asJSON := fs.Bool("json", false, "print the swarm report as JSON")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() != 0 || *swarm < 0 {
		return usageError(fs, stderr, "unexpected argument, or --swarm below 0")
	}
	url, from := resolveURL(url)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *swarm == 0 {
		return watchOne(ctx, url, from, *pollID, stdout, stderr)
	}
	rep, err := runSwarm(ctx, swarmConfig{
		url: url, poll: *pollID, viewers: *swarm, perIP: *perIP, ramp: *ramp, duration: *duration,
		votesPerSec: *votesPerSec, serverPID: *serverPID, sourceOffset: *sourceOffset, progress: stderr,
	})
	if err != nil {
		fmt.Fprintf(stderr, "tally watch: %v\n", err)
		return 1
	}
	return printReport(stdout, *asJSON, rep)
}

func wsURL(base, poll string) string {
	return "ws" + strings.TrimPrefix(base, "http") + "/v1/polls/" + poll + "/live"
}

// watchOne prints the tally as it changes, for a person at a terminal,
// until the poll is certified or ctx ends; it comes back after a dropped
// connection (client.Watch).
func watchOne(ctx context.Context, url, from, poll string, stdout, stderr io.Writer) int {
	c, err := client.New(url, client.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "tally watch: %s %q: want the node's address, http://host:port or https://host\n", from, url)
		return 2
	}
	err = c.Watch(ctx, poll, client.WatchOptions{OnTally: func(t client.Tally) error {
		keys := slices.Sorted(maps.Keys(t.Totals))
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%d", k, t.Totals[k]))
		}
		fmt.Fprintf(stdout, "%s seq %d %s total %d  %s\n", time.UnixMilli(t.Frame.AsOfMs).Format("15:04:05.000"), t.Seq, t.Status, t.Total, strings.Join(parts, " "))
		return nil
	}})
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "tally watch: %v\n", err)
		return 1
	}
	return 0
}

type swarmConfig struct {
	url, poll      string
	viewers, perIP int
	ramp, duration time.Duration
	votesPerSec    float64
	serverPID      int
	sourceOffset   int
	progress       io.Writer
}

// swarmReport is what a swarm run measured.
type swarmReport struct {
	Viewers        int     `json:"viewers"`
	Connected      int     `json:"connected"`
	Seconds        float64 `json:"seconds"`
	Frames         uint64  `json:"frames"`         // frames received while measuring
	FramesPerSec   float64 `json:"frames_per_sec"` // per viewer
	Missed         uint64  `json:"missed"`         // seq numbers a viewer never saw
	Disconnected   int64   `json:"disconnected"`   // viewers the server dropped while measuring
	LagP50Ms       float64 `json:"lag_p50_ms"`     // frame timestamp → received, all frames
	LagP99Ms       float64 `json:"lag_p99_ms"`
	LagMaxMs       float64 `json:"lag_max_ms"`
	WorstSecP99Ms  float64 `json:"worst_second_p99_ms"`
	ServerRSSMB    float64 `json:"server_rss_mb,omitempty"`
	RSSPerViewerKB float64 `json:"rss_per_viewer_kb,omitempty"` // (RSS connected − RSS before) / viewers
	CPUPerFrameUs  float64 `json:"cpu_per_frame_us,omitempty"`  // server CPU while measuring / frames delivered
}

func (r swarmReport) print(w io.Writer) {
	fmt.Fprintf(w, "viewers %d connected %d, %.0fs measured\n", r.Viewers, r.Connected, r.Seconds)
	fmt.Fprintf(w, "frames received %d (%.2f per viewer per second), missed %d, viewers dropped %d\n", r.Frames, r.FramesPerSec, r.Missed, r.Disconnected)
	fmt.Fprintf(w, "delivery lag p50 %.1f ms, p99 %.1f ms, max %.1f ms; worst one-second p99 %.1f ms\n", r.LagP50Ms, r.LagP99Ms, r.LagMaxMs, r.WorstSecP99Ms)
	if r.ServerRSSMB > 0 {
		fmt.Fprintf(w, "server RSS %.1f MB, %.1f KB per viewer; server CPU %.2f µs per delivered frame\n", r.ServerRSSMB, r.RSSPerViewerKB, r.CPUPerFrameUs)
	}
}

// runSwarm connects the viewers from many loopback source addresses,
// sends votes so each tick carries a change, and measures delivery.
func runSwarm(ctx context.Context, cfg swarmConfig) (*swarmReport, error) {
	rssBefore, _, _ := procStats(cfg.serverPID)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sw := &swarm{}
	err := sw.connect(ctx, cfg)
	fmt.Fprintf(cfg.progress, "\rconnected %d/%d\n", sw.connected.Load(), cfg.viewers)
	if err != nil {
		cancel()
		sw.viewers.Wait()
		return nil, err
	}
	time.Sleep(2 * time.Second) // settle
	rssConnected, cpuStart, _ := procStats(cfg.serverPID)

	voteCtx, stopVotes := context.WithCancel(ctx) // votes keep every tick busy
	var votes sync.WaitGroup
	votes.Go(func() { swarmVotes(voteCtx, cfg) })
	elapsed := sw.measure(ctx, cfg)
	rssEnd, cpuEnd, _ := procStats(cfg.serverPID)
	stopVotes()
	votes.Wait()
	cancel()
	sw.viewers.Wait()

	rep := sw.report(cfg, elapsed)
	if cfg.serverPID > 0 && rep.Connected > 0 {
		rep.ServerRSSMB = float64(rssEnd) / (1 << 20)
		rep.RSSPerViewerKB = float64(rssConnected-rssBefore) / 1024 / float64(rep.Connected)
		if rep.Frames > 0 {
			rep.CPUPerFrameUs = (cpuEnd - cpuStart).Seconds() * 1e6 / float64(rep.Frames)
		}
	}
	return rep, nil
}

// swarm is a run's viewers and what they counted.
type swarm struct {
	viewers   sync.WaitGroup // one goroutine per viewer, ended by the run's context
	measuring atomic.Bool
	frames    atomic.Uint64
	missed    atomic.Uint64
	dropped   atomic.Int64
	connected atomic.Int64

	lagMu     sync.Mutex
	lags      []float64 // this second's lags, ms; guarded by lagMu
	perSecP99 []float64
	all       []float64
}

// connect opens the viewers' sockets over the ramp, each from the source
// address its index gives, and starts reading each; it stops at the first
// refused dial.
func (sw *swarm) connect(ctx context.Context, cfg swarmConfig) error {
	interval := cfg.ramp / time.Duration(max(cfg.viewers, 1))
	for i := range cfg.viewers {
		src := cfg.sourceOffset + i/cfg.perIP
		ip := net.IPv4(127, byte(1+src/250), byte(src%250), 2)
		client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}).DialContext}}
		c, _, err := websocket.Dial(ctx, wsURL(cfg.url, cfg.poll), &websocket.DialOptions{HTTPClient: client})
		if err != nil {
			return fmt.Errorf("viewer %d from %s: %w", i, ip, err)
		}
		c.SetReadLimit(1 << 16)
		sw.connected.Add(1)
		sw.viewers.Go(func() { sw.read(ctx, c) })
		if i%1000 == 999 {
			fmt.Fprintf(cfg.progress, "\rconnected %d/%d", i+1, cfg.viewers)
		}
		time.Sleep(interval)
	}
	return nil
}

// read follows one viewer's socket until the run ends, counting frames,
// seq gaps and each frame's lag while the run measures.
func (sw *swarm) read(ctx context.Context, c *websocket.Conn) {
	defer c.CloseNow()
	// Thousands of viewers share this machine's two cores with the
	// node: read into one buffer and pick the two fields out by hand.
	var last uint64
	buf := make([]byte, 0, 1024)
	for {
		_, r, err := c.Reader(ctx)
		if err == nil {
			buf, err = readAll(r, buf[:0])
		}
		if err != nil {
			if ctx.Err() == nil && sw.measuring.Load() {
				sw.dropped.Add(1)
			}
			return
		}
		now := time.Now().UnixMilli()
		if bytes.HasPrefix(buf, []byte(`{"type":"heartbeat"`)) {
			continue
		}
		seq, asOf := uint64(jsonInt(buf, `"seq":`)), jsonInt(buf, `"as_of_ms":`)
		if sw.measuring.Load() {
			sw.frames.Add(1)
			if last != 0 && seq > last+1 {
				sw.missed.Add(seq - last - 1)
			}
			sw.lagMu.Lock()
			sw.lags = append(sw.lags, float64(now-asOf))
			sw.lagMu.Unlock()
		}
		last = seq
	}
}

// swarmVotes posts votes at cfg.votesPerSec until ctx ends.
func swarmVotes(ctx context.Context, cfg swarmConfig) {
	t := time.NewTicker(time.Duration(float64(time.Second) / max(cfg.votesPerSec, 1)))
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		body := fmt.Sprintf(`{"option":"%s","voter":"swarm-%d","idem":"swarm-%d-%d"}`, []string{"red", "green", "blue", "gold"}[rand.IntN(4)], i%5000, time.Now().UnixNano(), i)
		res, err := http.Post(cfg.url+"/v1/polls/"+cfg.poll+"/votes", "application/json", strings.NewReader(body))
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}
}

// measure counts for cfg.duration, printing each second's figures, and
// returns the seconds measured.
func (sw *swarm) measure(ctx context.Context, cfg swarmConfig) float64 {
	start := time.Now()
	sw.measuring.Store(true)
	defer sw.measuring.Store(false)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for time.Since(start) < cfg.duration && ctx.Err() == nil {
		<-tick.C
		sw.lagMu.Lock()
		sec := sw.lags
		sw.lags = nil
		sw.lagMu.Unlock()
		sw.all = append(sw.all, sec...)
		slices.Sort(sec)
		p99 := pct(sec, 0.99)
		sw.perSecP99 = append(sw.perSecP99, p99)
		fmt.Fprintf(cfg.progress, "t=%2.0fs frames %6d lag p50 %5.1f ms p99 %6.1f ms missed %d dropped %d\n",
			time.Since(start).Seconds(), len(sec), pct(sec, 0.5), p99, sw.missed.Load(), sw.dropped.Load())
	}
	return time.Since(start).Seconds()
}

// report sums the run up; the server's figures are the caller's.
func (sw *swarm) report(cfg swarmConfig, elapsed float64) *swarmReport {
	slices.Sort(sw.all)
	rep := &swarmReport{
		Viewers: cfg.viewers, Connected: int(sw.connected.Load()), Seconds: elapsed,
		Frames: sw.frames.Load(), Missed: sw.missed.Load(), Disconnected: sw.dropped.Load(),
		LagP50Ms: pct(sw.all, 0.5), LagP99Ms: pct(sw.all, 0.99), LagMaxMs: pct(sw.all, 1), WorstSecP99Ms: slices.Max(append(sw.perSecP99, 0)),
	}
	if rep.Connected > 0 {
		rep.FramesPerSec = float64(rep.Frames) / elapsed / float64(rep.Connected)
	}
	return rep
}

// readAll reads r to the end into buf.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// jsonInt returns the non-negative integer after key in b, or 0.
func jsonInt(b []byte, key string) int64 {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0
	}
	var n int64
	for _, c := range b[i+len(key):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

// procStats reads a process's resident memory and CPU time from /proc.
func procStats(pid int) (rss int64, cpu time.Duration, err error) {
	if pid <= 0 {
		return 0, 0, errors.New("no pid")
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			rss = kb * 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return rss, 0, err
	}
	// Fields after the command name (which may hold spaces) start after ')'.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	var utime, stime int64
	fmt.Sscan(fields[11], &utime)
	fmt.Sscan(fields[12], &stime)
	const ticksPerSec = 100 // USER_HZ on Linux
	return rss, time.Duration(utime+stime) * time.Second / ticksPerSec, nil
}
