package node

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

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
		catchUpTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_catch_up_timeouts_total", Help: "Starts after which the node took votes without having caught up with the other replicas' ballots (--catch-up-wait passed).",
		}),
	}
	n.m.edgeVotes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tally_edge_votes_total",
		Help: "Votes this edge's clients sent (HTTP and live socket), by the answer they got, relayed from a full node or the edge's own (unavailable, outcome_unknown: no full node answered in time): result (accepted, duplicate, late, rejected; unknown for outcome_unknown, which the client retries) and, for rejections, reason (the API error code). A full node counts the votes relayed to it in tally_votes_total: sum one or the other, never both.",
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
		n.m.commitSeconds, n.m.batchRecords, n.m.replaySeconds, n.m.replayRecords, n.m.checkpointSeconds, n.m.checkpointFails, n.m.catchUpTimeouts, n.m.pollsForgotten,
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
