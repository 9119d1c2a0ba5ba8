package node

import (
	"math"
	"net/http"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tally/certify"
	"tally/internal/buildinfo"
)

// nodeMetrics are the series the node itself owns; ingest registers its own.
type nodeMetrics struct {
	commitSeconds     prometheus.Histogram
	batchRecords      prometheus.Histogram
	replaySeconds     prometheus.Gauge
	checkpointSeconds prometheus.Gauge
	replayRecords     prometheus.Gauge
	checkpointFails   prometheus.Counter
	catchUpTimeouts   prometheus.Counter
	pollsForgotten    prometheus.Counter
	closeWait         prometheus.Histogram
	closeUnconfirmed  prometheus.Counter
	edgeVotes         *prometheus.CounterVec // at an edge, every answer its clients got (refusals.go)
	http              *httpMetrics
}

// registerMetrics registers the node's own series on reg (the other
// rooms register theirs). It is long because it is one list of them.
func (n *Node) registerMetrics(reg *prometheus.Registry) error {
	n.m = nodeMetrics{
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tally_ledger_commit_seconds",
			Help:    "Time from building a ledger batch to its fsync.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16),
		}),
		batchRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tally_ledger_batch_records",
			Help:    "Records written by one synced ledger batch.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13),
		}),
		replaySeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tally_replay_seconds", Help: "How long the start-up replay of the ledger took.",
		}),
		replayRecords: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tally_replay_records", Help: "Records applied by the start-up replay (after the checkpoint, if one was loaded).",
		}),
		checkpointSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tally_checkpoint_seconds", Help: "How long the last checkpoint took to write.",
		}),
		pollsForgotten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_polls_forgotten_total", Help: "Polls dropped from memory once certified and past retention.",
		}),
		checkpointFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_checkpoint_failures_total", Help: "Background checkpoints that failed (retried at the next tick).",
		}),
		closeWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tally_close_seconds",
			Help:    "Time from a close written at this node to its answer: its votes in flight answered and every live full node's confirmation (or the 1 s wait).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 12),
		}),
		closeUnconfirmed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_close_unconfirmed_total", Help: "Full nodes that did not confirm a close written at this node within the 1 s wait (they count until they hear of it).",
		}),
		catchUpTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_catch_up_timeouts_total", Help: "Starts after which the node took votes without having caught up with the other replicas' ballots (--catch-up-wait passed).",
		}),
	}
	n.m.edgeVotes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tally_edge_votes_total",
		Help: "Votes this edge's clients sent (HTTP and live socket), by the answer they got, relayed from a full node or the edge's own (unavailable, outcome_unknown: no full node answered in time; invalid_request, invalid_option, too_large, poll_not_found: refused before relaying, as a full node would, and counted by none): result (accepted, duplicate, late, rejected; unknown for outcome_unknown, which the client retries) and, for rejections, reason (the API error code). A full node counts the votes relayed to it in tally_votes_total: sum one or the other, never both.",
	}, []string{"result", "reason"})
	var err error
	if n.m.http, err = newHTTPMetrics(reg); err != nil {
		return err
	}
	bi := buildinfo.Read()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tally_build_info",
		Help: "Always 1; the labels say which build runs and where: version, revision, modified, goversion, region, role.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "modified": strconv.FormatBool(bi.Modified),
			"goversion": bi.GoVersion, "region": n.cfg.Region, "role": n.cfg.Role},
	})
	buildInfo.Set(1)
	cs := []prometheus.Collector{
		buildInfo, n.m.edgeVotes,
		n.m.commitSeconds, n.m.batchRecords, n.m.replaySeconds, n.m.replayRecords, n.m.checkpointSeconds, n.m.checkpointFails, n.m.catchUpTimeouts, n.m.pollsForgotten, n.m.closeWait, n.m.closeUnconfirmed,
		certify.NewExactnessCollector(n.state, n.cfg.Now, n.cfg.AdminAddr == ""),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tally_ledger_wal_syncs_total", Help: "fsyncs of the ledger's write-ahead log.",
		}, func() float64 { return float64(n.ledger.Stats().WALSyncs) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tally_ledger_records_total", Help: "Records appended to the ledger.",
		}, func() float64 { return float64(n.ledger.Stats().Appended) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tally_hlc_refused_total", Help: "Remote timestamps refused for being too far ahead.",
		}, func() float64 { return float64(n.clock.Refused()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tally_ready", Help: "1 while /readyz answers 200: the ledger is replayed, the node is in the cluster it was told of (--join answered, --expect-members seen), the other replicas' ballots caught up (or --catch-up-wait passed) and the node is not draining.",
		}, func() float64 {
			if n.ready.Load() && !n.draining.Load() && n.caughtUp.Load() && n.membersNotReady() == "" && n.edgeNotReady() == "" {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tally_open_polls", Help: "Polls open for voting now.",
		}, func() float64 { return float64(n.openPolls()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tally_polls_held", Help: "Polls held in memory (open, closed, kept until certified plus retention); at most --max-polls.",
		}, func() float64 { return float64(len(n.state.Defs.Polls())) }),
	}
	for _, c := range append(cs, n.backup.Collectors()...) {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// httpMetrics count every request by route (the ServeMux pattern, like
// "POST /v1/polls/{poll}/votes") and status code, and time the ones that
// are not streams.
type httpMetrics struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec

	mu     sync.Mutex
	routes []string // every route instrumented, for the OpenAPI test
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_http_requests_total",
			Help: "HTTP requests answered, by route (the ServeMux pattern) and status code.",
		}, []string{"route", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tally_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route; live streams (WebSocket, SSE) are not timed.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.seconds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// routeMux is a ServeMux whose every route is instrumented.
type routeMux struct {
	*http.ServeMux
	m *httpMetrics
}

func (mux routeMux) Handle(pattern string, h http.Handler) {
	mux.ServeMux.Handle(pattern, mux.m.instrument(pattern, h))
}

func (mux routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	mux.Handle(pattern, http.HandlerFunc(h))
}

// instrument wraps h; promhttp's wrappers keep the writer's Flusher and
// Hijacker, which SSE and WebSocket need.
func (m *httpMetrics) instrument(route string, h http.Handler) http.Handler {
	m.mu.Lock()
	m.routes = append(m.routes, route)
	m.mu.Unlock()
	labels := prometheus.Labels{"route": route}
	h = promhttp.InstrumentHandlerCounter(m.requests.MustCurryWith(labels), h)
	if strings.HasSuffix(route, "/live") || strings.HasSuffix(route, "/events") {
		return h
	}
	return promhttp.InstrumentHandlerDuration(m.seconds.MustCurryWith(labels), h)
}

// processCPU is the CPU time this process has used so far (user and
// system), for the fan-out's pacer; 0 where the kernel cannot say.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// schedWait returns, for the fan-out's pacer, a function that says how
// long this process's runnable goroutines waited for a core since its
// previous call, p99, from the Go scheduler's latency histogram
// (runtime/metrics "/sched/latencies:seconds"). It rises when the
// machine's cores are taken, by this process or by others: what the vote
// path's requests then queue for. 0 when nothing was scheduled.
func schedWait() func() time.Duration {
	const name = "/sched/latencies:seconds"
	var (
		mu   sync.Mutex
		prev []uint64
	)
	sample := []metrics.Sample{{Name: name}}
	return func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindFloat64Histogram {
			return 0
		}
		h := sample[0].Value.Float64Histogram()
		counts := make([]uint64, len(h.Counts))
		var total uint64
		for i, c := range h.Counts {
			if i < len(prev) {
				counts[i] = c - prev[i]
			} else {
				counts[i] = c
			}
			total += counts[i]
		}
		prev = append(prev[:0], h.Counts...)
		return p99(h.Buckets, counts, total)
	}
}

// p99 is the 99th percentile of a histogram's counts (buckets holds the
// boundaries: bucket i spans buckets[i] to buckets[i+1]), as the bucket's
// upper bound.
func p99(buckets []float64, counts []uint64, total uint64) time.Duration {
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(float64(total) * 0.99))
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= want {
			hi := buckets[i+1]
			if math.IsInf(hi, 1) {
				hi = buckets[i]
			}
			return time.Duration(hi * float64(time.Second))
		}
	}
	return 0
}
