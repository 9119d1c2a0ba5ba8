package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"tally/api"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"github.com/tsenart/vegeta/v12/lib/plot"
)

// loadConfig is one `tally load` run.
type loadConfig struct {
	urls        []string
	poll        string
	rate        int // requests per second; 0: as fast as the connections allow
	rampTo      int // when set, the rate rises linearly from rate to rampTo
	duration    time.Duration
	batch       int
	voters      int
	changes     float64 // share of votes that change an earlier voter's choice
	retries     float64 // share of requests that resend an earlier body (same idem)
	connections int
	options     []string
}

// loadReport is what a run measured.
type loadReport struct {
	Requests     int            `json:"requests"`
	Votes        int            `json:"votes"`
	Seconds      float64        `json:"seconds"`
	RequestsPerS float64        `json:"requests_per_sec"`
	VotesPerS    float64        `json:"votes_per_sec"` // acknowledged votes (any ack status) per second
	Codes        map[int]int    `json:"codes"`
	Acks         map[string]int `json:"acks"` // accepted, duplicate, late, rejected
	Errors       int            `json:"errors"`
	// Unknown counts the requests (socket messages) first answered 504
	// outcome_unknown: each went again, the same body and keys, after
	// Retry-After until a definitive answer, which is the one counted in
	// Codes and Acks (and their latency ends with it); Resent counts those
	// sends, StillUnknown the requests without a definitive answer within
	// unknownWait (their final answer stays outcome_unknown).
	Unknown      int     `json:"outcome_unknown"`
	Resent       int     `json:"resent"`
	StillUnknown int     `json:"still_unknown"`
	P50Ms        float64 `json:"p50_ms"`
	P90Ms        float64 `json:"p90_ms"`
	P99Ms        float64 `json:"p99_ms"`
	P999Ms       float64 `json:"p999_ms"`
	MaxMs        float64 `json:"max_ms"`
}

func runLoad(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally load", "tally load [--url URL,…] [--poll ID] [--rate R | --rate 0] [--batch N] [flags]")
	var urls string
	urlVar(fs, &urls, "the nodes' addresses, comma-separated: requests go round-robin (several regions at once) (default: $TALLY_URL, else "+defaultURL+")")
	pollID := fs.String("poll", "demo", "poll to vote in")
	rate := fs.Int("rate", 1000, "requests per second (open model); 0: as fast as --connections allow (closed model)")
	ramp := fs.Int("ramp-to", 0, "rise linearly from --rate to this rate over --duration")
	duration := fs.Duration("duration", 10*time.Second, "how long to send")
	batch := fs.Int("batch", 1, "votes per request (1-10)")
	voters := fs.Int("voters", 100_000, "distinct voter ids")
	changes := fs.Float64("changes", 0.1, "share of votes that change an earlier choice")
	retries := fs.Float64("retries", 0.02, "share of requests that are retries (the same body and idempotency keys again)")
	conns := fs.Int("connections", 64, "keep-alive connections (and workers)")
	options := fs.String("options", "red,green,blue,gold", "option ids to vote for")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	plotTo := fs.String("plot", "", "write an HTML plot of latency over time to this file")
	socket := fs.Bool("socket", false, "send the votes as messages on live WebSockets (--connections of them), as the page does, instead of HTTP requests")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	switch {
	case fs.NArg() != 0:
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	case *batch < 1 || *batch > 10:
		return usageError(fs, stderr, "--batch %d: must be 1-10", *batch)
	case *rate < 0 || *ramp < 0 || *duration <= 0 || *voters < 1 || *conns < 1:
		return usageError(fs, stderr, "--rate and --ramp-to must be 0 or more, --duration, --voters and --connections more than 0")
	}
	urls, _ = resolveURL(urls)
	cfg := loadConfig{urls: strings.Split(urls, ","), poll: *pollID, rate: *rate, rampTo: *ramp, duration: *duration,
		batch: *batch, voters: *voters, changes: *changes, retries: *retries, connections: *conns, options: strings.Split(*options, ",")}
	var p *plot.Plot
	if *plotTo != "" {
		p = plot.New(plot.Title(fmt.Sprintf("tally load: %s, batch %d", *pollID, *batch)))
	}
	var rep *loadReport
	var err error
	if *socket {
		rep, err = loadSockets(cfg, stderr)
	} else {
		rep, err = load(cfg, stderr, p)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tally load: %v\n", err)
		return 1
	}
	if p != nil {
		p.Close()
		f, err := os.Create(*plotTo)
		if err == nil {
			_, err = p.WriteTo(f)
			f.Close()
		}
		if err != nil {
			fmt.Fprintf(stderr, "tally load: plot: %v\n", err)
		}
	}
	if *asJSON {
		writeJSON(stdout, rep)
		return 0
	}
	fmt.Fprintf(stdout, "requests %d in %.1fs: %.0f req/s, %.0f votes/s acknowledged\n", rep.Requests, rep.Seconds, rep.RequestsPerS, rep.VotesPerS)
	fmt.Fprintf(stdout, "latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms\n", rep.P50Ms, rep.P90Ms, rep.P99Ms, rep.P999Ms, rep.MaxMs)
	fmt.Fprintf(stdout, "status codes %v, acks %v, transport errors %d\n", rep.Codes, rep.Acks, rep.Errors)
	fmt.Fprintf(stdout, "outcome unknown %d (sent again %d times with the same keys; still unknown after %v: %d)\n",
		rep.Unknown, rep.Resent, unknownWait, rep.StillUnknown)
	return 0
}

// unknownWait bounds how long a vote answered outcome_unknown is sent again.
const unknownWait = 30 * time.Second

// retryAfter is an outcome_unknown answer's Retry-After, 1 to 10 s.
func retryAfter(h http.Header) time.Duration {
	n, _ := strconv.Atoi(h.Get("Retry-After"))
	return time.Duration(min(max(n, 1), 10)) * time.Second
}

// settler is the load's transport: a request answered 504 (an edge that
// cannot know whether its full node ledgered the votes) goes again, the
// same body and keys, after Retry-After until a definitive answer or
// unknownWait; the request's answer is the last. Each attempt has its
// own timeout.
type settler struct {
	next                          http.RoundTripper
	timeout, wait                 time.Duration
	unknown, resent, stillUnknown atomic.Int64
}

func (s *settler) RoundTrip(req *http.Request) (*http.Response, error) {
	deadline := time.Now().Add(s.wait)
	res, err := s.attempt(req)
	if err != nil || res.StatusCode != http.StatusGatewayTimeout || req.GetBody == nil {
		return res, err
	}
	s.unknown.Add(1)
	for {
		wait := retryAfter(res.Header)
		if time.Now().Add(wait).After(deadline) {
			s.stillUnknown.Add(1)
			return res, nil
		}
		io.Copy(io.Discard, io.LimitReader(res.Body, 1<<12))
		res.Body.Close()
		t := time.NewTimer(wait)
		select {
		case <-req.Context().Done():
			t.Stop()
			s.stillUnknown.Add(1)
			return nil, req.Context().Err()
		case <-t.C:
		}
		body, err := req.GetBody()
		if err != nil {
			s.stillUnknown.Add(1)
			return nil, err
		}
		again := req.Clone(req.Context())
		again.Body = body
		s.resent.Add(1)
		if res, err = s.attempt(again); err != nil {
			s.stillUnknown.Add(1)
			return nil, err
		}
		// After an unknown outcome a 503 is not definitive either (the
		// node answering it may not know yet what another did with the
		// first request): waited out the same way, as the clients do.
		if res.StatusCode != http.StatusGatewayTimeout && res.StatusCode != http.StatusServiceUnavailable {
			return res, nil
		}
	}
}

// attempt sends req once within s.timeout (reading the body included).
func (s *settler) attempt(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), s.timeout)
	res, err := s.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	res.Body = cancelOnClose{res.Body, cancel}
	return res, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// eachStamp calls f with the voter number (the idempotency key's last
// "-" field, as load and loadSockets write keys) and the stamp of every
// result of a vote answer that carries both.
func eachStamp(b []byte, f func(voter int, stamp string)) {
	for {
		i := bytes.Index(b, []byte(`"idem":"`))
		if i < 0 {
			return
		}
		b = b[i+8:]
		j := bytes.IndexByte(b, '"')
		if j < 0 {
			return
		}
		idem := b[:j]
		b = b[j:]
		obj := b
		if end := bytes.Index(b, []byte(`"idem":"`)); end >= 0 {
			obj = b[:end]
		}
		k := bytes.Index(obj, []byte(`"stamp":"`))
		if k < 0 {
			continue
		}
		stamp := obj[k+9:]
		l := bytes.IndexByte(stamp, '"')
		dash := bytes.LastIndexByte(idem, '-')
		if l < 0 || dash < 0 {
			continue
		}
		if v, err := strconv.Atoi(string(idem[dash+1:])); err == nil {
			f(v, string(stamp[:l]))
		}
	}
}

// voteTargeter makes request bodies: new voters, voters changing their
// mind, and retries of earlier bodies. A voter's vote carries the newest
// stamp the voter was answered with as "after" (as our clients do), so a
// change of mind sent to another --url is stamped after the vote it
// replaces.
type voteTargeter struct {
	cfg    loadConfig
	mu     sync.Mutex
	next   int // next voter id never used
	seq    int
	run    string   // makes this run's idempotency keys its own
	recent [][]byte // bodies that may be retried
	stamps []string // voter → the newest stamp of their answers
	header http.Header
	rng    *rand.Rand
}

// heard keeps the stamps of an answer's results.
func (t *voteTargeter) heard(body []byte) {
	if !bytes.Contains(body, []byte(`"stamp":"`)) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	eachStamp(body, func(v int, stamp string) {
		if v >= 0 && v < len(t.stamps) {
			t.stamps[v] = api.LaterStamp(t.stamps[v], stamp)
		}
	})
}

func (t *voteTargeter) target(tg *vegeta.Target) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	tg.Method, tg.Header = http.MethodPost, t.header
	tg.URL = t.cfg.urls[t.seq%len(t.cfg.urls)] + "/v1/polls/" + t.cfg.poll + "/votes"
	if len(t.recent) > 0 && t.rng.Float64() < t.cfg.retries {
		tg.Body = t.recent[t.rng.IntN(len(t.recent))]
		return nil
	}
	var b bytes.Buffer
	b.WriteString(`{"votes":[`)
	for i := range t.cfg.batch {
		voter := t.next % t.cfg.voters
		if t.next > 0 && t.rng.Float64() < t.cfg.changes {
			voter = t.rng.IntN(min(t.next, t.cfg.voters))
		} else {
			t.next++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"option":%q,"voter":"load-%d","idem":"%s-%d-%d-%d"`, t.cfg.options[t.rng.IntN(len(t.cfg.options))], voter, t.run, t.seq, i, voter)
		if after := t.stamps[voter]; after != "" {
			fmt.Fprintf(&b, `,"after":%q`, after)
		}
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	tg.Body = b.Bytes()
	if len(t.recent) < 4096 {
		t.recent = append(t.recent, tg.Body)
	} else {
		t.recent[t.rng.IntN(len(t.recent))] = tg.Body
	}
	return nil
}

func load(cfg loadConfig, progress io.Writer, p *plot.Plot) (*loadReport, error) {
	tr := &voteTargeter{cfg: cfg, run: fmt.Sprintf("run%x", time.Now().UnixNano()), header: http.Header{"Content-Type": {"application/json"}},
		stamps: make([]string, cfg.voters), rng: rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))}
	// A fixed pool of keep-alive connections and as many workers: without a
	// cap, an open-model run that falls behind opens ever more connections
	// and measures its own collapse instead of the server.
	set := &settler{next: &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: cfg.connections, MaxConnsPerHost: cfg.connections}, timeout: 30 * time.Second, wait: unknownWait}
	opts := []func(*vegeta.Attacker){vegeta.Client(&http.Client{Transport: set}), vegeta.MaxBody(1 << 12),
		vegeta.Workers(uint64(cfg.connections)), vegeta.MaxWorkers(uint64(cfg.connections))}
	var pacer vegeta.Pacer
	switch {
	case cfg.rate == 0:
		pacer = vegeta.ConstantPacer{} // no pacing: workers send as fast as answers come
	case cfg.rampTo > 0:
		pacer = vegeta.LinearPacer{StartAt: vegeta.Rate{Freq: cfg.rate, Per: time.Second},
			Slope: float64(cfg.rampTo-cfg.rate) / cfg.duration.Seconds()}
	default:
		pacer = vegeta.Rate{Freq: cfg.rate, Per: time.Second}
	}
	atk := vegeta.NewAttacker(opts...)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	done := make(chan struct{}) // ends the watcher with the run
	defer close(done)
	go func() {
		select {
		case <-sig:
			atk.Stop()
		case <-done:
		}
	}()

	rep := &loadReport{Codes: map[int]int{}, Acks: map[string]int{}}
	lat := make([]time.Duration, 0, 1<<16)
	start := time.Now()
	lastPrint, lastCount := start, 0
	for r := range atk.Attack(vegeta.Targeter(tr.target), pacer, cfg.duration, "tally") {
		rep.Requests++
		if r.Error != "" && r.Code == 0 {
			rep.Errors++
		}
		rep.Codes[int(r.Code)]++
		lat = append(lat, r.Latency)
		for _, st := range []string{"accepted", "duplicate", "late", "rejected"} {
			if n := bytes.Count(r.Body, []byte(`"status":"`+st+`"`)); n > 0 {
				rep.Acks[st] += n
				rep.Votes += n
			}
		}
		tr.heard(r.Body)
		if p != nil {
			p.Add(r)
		}
		if time.Since(lastPrint) >= time.Second {
			fmt.Fprintf(progress, "\r%5.1fs  %8d requests  %7.0f req/s  errors %d   ", time.Since(start).Seconds(), rep.Requests,
				float64(rep.Requests-lastCount)/time.Since(lastPrint).Seconds(), rep.Errors+rep.Requests-rep.Codes[200])
			lastPrint, lastCount = time.Now(), rep.Requests
		}
	}
	fmt.Fprintln(progress)
	if rep.Requests == 0 {
		return nil, fmt.Errorf("no requests were sent")
	}
	rep.Unknown, rep.Resent, rep.StillUnknown = int(set.unknown.Load()), int(set.resent.Load()), int(set.stillUnknown.Load())
	rep.finish(start, lat)
	return rep, nil
}

// finish sets the report's rates from the run's start and its
// percentiles from the latencies (at least one).
func (rep *loadReport) finish(start time.Time, lat []time.Duration) {
	rep.Seconds = time.Since(start).Seconds()
	rep.RequestsPerS = float64(rep.Requests) / rep.Seconds
	rep.VotesPerS = float64(rep.Votes) / rep.Seconds
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	rep.P50Ms, rep.P90Ms, rep.P99Ms, rep.P999Ms, rep.MaxMs = q(0.5), q(0.9), q(0.99), q(0.999), q(1)
}
