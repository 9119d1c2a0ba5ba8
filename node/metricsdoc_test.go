package node

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// metricDesc is one metric family as a node's registry describes it.
type metricDesc struct {
	name, help     string
	labels, consts string
}

var descRE = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), unit: "[^"]*", constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}\}$`)

// registered returns every tally_* family a running node registers,
// sorted by name: what /metrics can export.
func registered(t *testing.T, reg *prometheus.Registry) []metricDesc {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	var out []metricDesc
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		name, _ := strconv.Unquote(m[1])
		help, _ := strconv.Unquote(m[2])
		if !strings.HasPrefix(name, "tally_") {
			continue
		}
		consts := regexp.MustCompile(`="[^"]*"`).ReplaceAllString(m[3], "")
		out = append(out, metricDesc{name: name, help: help, labels: m[4], consts: consts})
	}
	slices.SortFunc(out, func(a, b metricDesc) int { return strings.Compare(a.name, b.name) })
	return out
}

// metricsDoc is docs/metrics.md as the registry says it should read.
func metricsDoc(ms []metricDesc) string {
	var b strings.Builder
	b.WriteString("# Metrics\n\n")
	b.WriteString("Every `tally_*` series a node exports on `/metrics` (on `--admin-addr` when set),\n")
	b.WriteString("besides Go's `go_*` and the process's `process_*` collectors. This file is\n")
	b.WriteString("generated from a running node's registry by `node/metricsdoc_test.go`, which\n")
	b.WriteString("fails when it drifts; `TALLY_UPDATE_DOCS=1 go test ./node -run TestMetricsDoc`\n")
	b.WriteString("rewrites it. Histograms export `_bucket`, `_sum` and `_count`. The dashboard\n")
	b.WriteString("(`deploy/grafana/dashboards/tally.json`) and the alert rules\n")
	b.WriteString("(`deploy/prometheus/alerts.yml`) query only these.\n\n")
	b.WriteString("**Votes by answer, counted once.** `tally_votes_total{result,reason}` counts\n")
	b.WriteString("every vote a full node answered — its own clients' over HTTP and the live\n")
	b.WriteString("socket, and those edges relayed to it — by result and, for a refusal, its\n")
	b.WriteString("reason (the API error code: `session_mismatch`, `rate_limited`, …), voter-token\n")
	b.WriteString("and malformed-body refusals included. An edge decides no vote that\n")
	b.WriteString("counts: it counts what its clients were answered, the full node's answer\n")
	b.WriteString("or its own, in `tally_edge_votes_total{result,reason}` with the same\n")
	b.WriteString("labels. Its own are `unavailable` and `outcome_unknown` (no full node\n")
	b.WriteString("answered in time) and the refusals it makes before relaying, as every\n")
	b.WriteString("full node would make them (`invalid_request`, `invalid_option`,\n")
	b.WriteString("`too_large`, `poll_not_found`): those reach no full node, so they are in\n")
	b.WriteString("`tally_edge_votes_total` only. A vote relayed is in both, so sum one or\n")
	b.WriteString("the other, never both: the cluster's votes by answer are\n")
	b.WriteString("`sum by (result, reason) (rate(tally_votes_total[1m]))` (edges never count in\n")
	b.WriteString("it; their clients' malformed requests are not in it); what the edges'\n")
	b.WriteString("clients saw, the edges' own refusals included, is\n")
	b.WriteString("`sum by (result, reason) (rate(tally_edge_votes_total[1m]))`.\n")
	b.WriteString("\n")
	b.WriteString("| metric | labels | meaning |\n| --- | --- | --- |\n")
	for _, m := range ms {
		labels := m.labels
		if m.consts != "" {
			labels = strings.Trim(m.consts+","+labels, ",")
		}
		if labels != "" {
			labels = "`" + strings.ReplaceAll(labels, ",", "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", m.name, labels, strings.ReplaceAll(m.help, "|", `\|`))
	}
	return b.String()
}

// TestMetricsDoc keeps docs/metrics.md equal to what a node registers.
func TestMetricsDoc(t *testing.T) {
	tn := startNode(t, t.TempDir(), nil)
	want := metricsDoc(registered(t, tn.reg))
	const path = "../docs/metrics.md"
	if os.Getenv("TALLY_UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("docs/metrics.md is not what the registry says; run TALLY_UPDATE_DOCS=1 go test ./node -run TestMetricsDoc and review the diff")
	}
}

// TestDashboardAndAlertsQueryRealMetrics: every tally_* series the
// Grafana dashboard and the alert rules query is one a node exports.
func TestDashboardAndAlertsQueryRealMetrics(t *testing.T) {
	tn := startNode(t, t.TempDir(), nil)
	known := map[string]bool{}
	for _, m := range registered(t, tn.reg) {
		known[m.name] = true
	}
	series := regexp.MustCompile(`\btally_[a-z0-9_]+`)
	for _, path := range []string{"../deploy/grafana/dashboards/tally.json", "../deploy/prometheus/alerts.yml"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		queried := series.FindAllString(string(b), -1)
		if len(queried) < 5 {
			t.Fatalf("%s queries only %v", path, queried)
		}
		for _, q := range queried {
			name := q
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(q, suffix); ok && known[base] {
					name = base
				}
			}
			if !known[name] {
				t.Errorf("%s queries %s, which no node exports", path, q)
			}
		}
	}
}
