package deploy

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"tally/node"
)

// chart is the Helm chart's directory.
var chart = filepath.Join(root, "deploy", "helm", "tally")

// helmBin is the helm binary: $TALLY_HELM, or helm on the PATH. Without
// it the chart's tests skip, except with CI=true, where .ci/run installs
// it from the Go module proxy.
func helmBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TALLY_HELM"); p != "" {
		return p
	}
	p, err := exec.LookPath("helm")
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("helm is missing and CI=true needs the chart's checks (.ci/run installs it: go install helm.sh/helm/v4/cmd/helm@v4.3.2)")
	}
	t.Skip("helm is missing: go install helm.sh/helm/v4/cmd/helm@v4.3.2, or TALLY_HELM=path/to/helm")
	return ""
}

func runHelm(t *testing.T, args ...string) []byte {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(helmBin(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.Bytes()
}

// manifest is one rendered Kubernetes object, as generic YAML.
type manifest map[string]any

func (m manifest) kind() string { s, _ := m["kind"].(string); return s }
func (m manifest) name() string { return str(dig(m, "metadata", "name")) }

func dig(v any, path ...string) any {
	if m, ok := v.(manifest); ok {
		v = map[string]any(m)
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func str(v any) string { s, _ := v.(string); return s }

func list(v any) []any { l, _ := v.([]any); return l }

// render runs helm template over the chart with the values files given.
func render(t *testing.T, values ...string) []manifest {
	t.Helper()
	args := []string{"template", "t", chart, "--namespace", "live", "--set", "image.repository=registry.example/tally"}
	for _, v := range values {
		args = append(args, "-f", filepath.Join(chart, "examples", v))
	}
	dec := yaml.NewDecoder(bytes.NewReader(runHelm(t, args...)))
	var out []manifest
	for {
		var m map[string]any // not a manifest: yaml.v3 would make every nested mapping one
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("rendered manifests: %v", err)
		}
		if m != nil {
			out = append(out, manifest(m))
		}
	}
}

func TestHelmLint(t *testing.T) {
	runHelm(t, "lint", "--strict", chart, "--set", "image.repository=registry.example/tally")
	for _, f := range examples(t) {
		runHelm(t, "lint", "--strict", chart, "--set", "image.repository=registry.example/tally", "-f", f)
	}
}

// The chart's nodes are what the node expects: every argument a real flag
// with a value it takes; a StatefulSet per region with its ledger on a
// volume; the secrets mounted as files from the Secret, never in an
// argument or a variable; probes on the HTTP port's /readyz and /healthz;
// a grace period past the drain and the shutdown timeout; a disruption
// budget per region; edges with an autoscaler; NATS embedded or the NATS
// chart's.
func TestHelmChartRendersWhatTheNodeNeeds(t *testing.T) {
	for _, tc := range []struct {
		values  []string
		regions []string
		edges   bool
		natsURL bool
	}{
		{nil, []string{"local"}, false, false},
		{[]string{"three-regions.yaml"}, []string{"eu-west", "us-east", "ap-south"}, true, false},
		{[]string{"nats-chart.yaml"}, []string{"eu-west", "us-east", "ap-south"}, true, true},
		{[]string{"public.yaml"}, []string{"eu-west"}, true, false},
	} {
		t.Run(strings.Join(append([]string{"defaults"}, tc.values...), "+"), func(t *testing.T) {
			ms := render(t, tc.values...)
			byKind := map[string][]manifest{}
			for _, m := range ms {
				byKind[m.kind()] = append(byKind[m.kind()], m)
			}
			if n := len(byKind["StatefulSet"]); n != len(tc.regions) {
				t.Fatalf("%d StatefulSets, want one a region (%d)", n, len(tc.regions))
			}
			for _, r := range tc.regions {
				sts := find(t, byKind["StatefulSet"], "t-"+r)
				args := checkPod(t, sts, "full", r, tc.regions, tc.natsURL)
				if dig(sts, "spec", "serviceName") != "t-"+r || len(list(dig(sts, "spec", "volumeClaimTemplates"))) != 1 {
					t.Errorf("%s: want its headless Service and a volume claim for the ledger", sts.name())
				}
				for _, f := range []string{"--admin-token-file=/etc/tally/secrets/admin-token", "--session-secret-file=/etc/tally/secrets/session-secret"} {
					if !slices.Contains(args, f) {
						t.Errorf("%s: no %s", sts.name(), f)
					}
				}
				pdb := find(t, byKind["PodDisruptionBudget"], "t-"+r)
				if sel := dig(pdb, "spec", "selector", "matchLabels"); dig(sel, "tally/region") != r || dig(sel, "app.kubernetes.io/component") != "full" {
					t.Errorf("%s: the budget selects %v, not the region's full nodes", pdb.name(), sel)
				}
				if !tc.edges {
					continue
				}
				dep := find(t, byKind["Deployment"], "t-"+r+"-edge")
				args = checkPod(t, dep, "edge", r, tc.regions, tc.natsURL)
				for _, a := range args {
					if strings.HasPrefix(a, "--admin-token") || strings.HasPrefix(a, "--session-secret") {
						t.Errorf("%s: an edge needs the gossip key only, not %s", dep.name(), a)
					}
				}
				hpa := find(t, byKind["HorizontalPodAutoscaler"], "t-"+r+"-edge")
				if dig(hpa, "spec", "scaleTargetRef", "name") != dep.name() || dig(hpa, "spec", "maxReplicas") != 20 {
					t.Errorf("%s: scales %v up to %v", hpa.name(), dig(hpa, "spec", "scaleTargetRef", "name"), dig(hpa, "spec", "maxReplicas"))
				}
			}
			if tc.edges {
				return
			}
			if n := len(byKind["Deployment"]) + len(byKind["HorizontalPodAutoscaler"]); n != 0 {
				t.Errorf("no edges asked for, %d edge objects rendered", n)
			}
		})
	}
}

// checkPod checks a full node's or an edge's pod template and returns its
// container's arguments.
func checkPod(t *testing.T, m manifest, role, region string, regions []string, natsURL bool) []string {
	t.Helper()
	spec := dig(m, "spec", "template", "spec")
	containers := list(dig(spec, "containers"))
	if len(containers) != 1 {
		t.Fatalf("%s: %d containers", m.name(), len(containers))
	}
	c := containers[0]
	var args []string
	for _, a := range list(dig(c, "args")) {
		args = append(args, str(a))
	}
	// Every argument is a flag of the node with a value it takes, once
	// Kubernetes has put the pod's name and address in.
	cfg := node.DefaultConfig()
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.RegisterFlags(fs)
	expanded := make([]string, len(args))
	for i, a := range args {
		expanded[i] = strings.NewReplacer("$(POD_NAME)", "t-"+region+"-0", "$(POD_IP)", "10.1.2.3").Replace(a)
	}
	if err := fs.Parse(expanded); err != nil || fs.NArg() != 0 {
		t.Fatalf("%s: the node refuses its arguments: %v %v", m.name(), err, fs.Args())
	}
	if string(cfg.Role) != role || cfg.Region != region || cfg.DataDir != "/data" || cfg.GossipKeyFile != "/etc/tally/secrets/gossip-key" || cfg.GossipAdvertise != "10.1.2.3:7946" {
		t.Errorf("%s: role %q region %q data %q key file %q advertise %q", m.name(), cfg.Role, cfg.Region, cfg.DataDir, cfg.GossipKeyFile, cfg.GossipAdvertise)
	}
	for _, r := range regions { // every region's first full node is a seed
		if seed := "t-" + r + "-0.t-" + r + ".live.svc:7946"; !slices.Contains(cfg.Join, seed) {
			t.Errorf("%s: --join %v lacks %s", m.name(), cfg.Join, seed)
		}
	}
	if natsURL != (cfg.NATSURL != "") || natsURL && cfg.NATSURL != "nats://nats-"+region+":4222" {
		t.Errorf("%s: --nats-url %q", m.name(), cfg.NATSURL)
	}
	if natsURL && slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--nats-gateway-addr") }) {
		t.Errorf("%s: an embedded NATS gateway beside --nats-url", m.name())
	}
	// No secret in an argument or a variable: they are files.
	for _, a := range args {
		for _, secret := range []string{"--gossip-key=", "--admin-token=", "--session-secret="} {
			if strings.HasPrefix(a, secret) {
				t.Errorf("%s: a secret in an argument: %s", m.name(), a)
			}
		}
	}
	for _, e := range list(dig(c, "env")) {
		name := str(dig(e, "name"))
		if dig(e, "valueFrom", "secretKeyRef") != nil || strings.Contains(name, "KEY") || strings.Contains(name, "TOKEN") || strings.Contains(name, "SECRET") {
			t.Errorf("%s: a secret in a variable: %v", m.name(), e)
		}
	}
	mounted := false
	for _, vm := range list(dig(c, "volumeMounts")) {
		if dig(vm, "mountPath") == "/etc/tally/secrets" && dig(vm, "readOnly") == true {
			for _, v := range list(dig(spec, "volumes")) {
				if dig(v, "name") == dig(vm, "name") && dig(v, "secret", "secretName") == "tally-secrets" {
					mounted = true
				}
			}
		}
	}
	if !mounted {
		t.Errorf("%s: the Secret is not mounted read-only at /etc/tally/secrets", m.name())
	}
	// Probes on the port --http-addr listens on.
	httpPort := 0
	for _, p := range list(dig(c, "ports")) {
		if dig(p, "name") == "http" {
			httpPort, _ = dig(p, "containerPort").(int)
		}
	}
	if want := strings.TrimPrefix(cfg.HTTPAddr, ":"); strconv.Itoa(httpPort) != want {
		t.Errorf("%s: the http port %d is not --http-addr %s", m.name(), httpPort, cfg.HTTPAddr)
	}
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
		if dig(c, probe, "httpGet", "path") != path || dig(c, probe, "httpGet", "port") != "http" {
			t.Errorf("%s: %s is %v", m.name(), probe, dig(c, probe))
		}
	}
	// Kubernetes waits past the drain and the shutdown timeout.
	grace, _ := dig(spec, "terminationGracePeriodSeconds").(int)
	if time.Duration(grace)*time.Second <= cfg.Drain+cfg.ShutdownTimeout {
		t.Errorf("%s: terminationGracePeriodSeconds %d, not past --drain %v + --shutdown-timeout %v", m.name(), grace, cfg.Drain, cfg.ShutdownTimeout)
	}
	return args
}

func find(t *testing.T, ms []manifest, name string) manifest {
	t.Helper()
	for _, m := range ms {
		if m.name() == name {
			return m
		}
	}
	t.Fatalf("no %s rendered", name)
	return nil
}

// The chart's dashboard and alert rules are the deploy files', and what it
// renders into its ConfigMaps.
func TestHelmChartShipsTheDashboardAndAlerts(t *testing.T) {
	for copy, orig := range map[string]string{"dashboard.json": "grafana/dashboards/tally.json", "alerts.yml": "prometheus/alerts.yml"} {
		a, err := os.ReadFile(filepath.Join(chart, "files", copy))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(root, "deploy", orig))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("deploy/helm/tally/files/%s differs from deploy/%s: cp deploy/%s deploy/helm/tally/files/%s", copy, orig, orig, copy)
		}
	}
	ms := render(t)
	var cms []manifest
	for _, m := range ms {
		if m.kind() == "ConfigMap" {
			cms = append(cms, m)
		}
	}
	dash := find(t, cms, "t-dashboard")
	want, _ := os.ReadFile(filepath.Join(root, "deploy", "grafana", "dashboards", "tally.json"))
	if got := str(dig(dash, "data", "tally.json")); strings.TrimSpace(got) != strings.TrimSpace(string(want)) || dig(dash, "metadata", "labels", "grafana_dashboard") != "1" {
		t.Errorf("the dashboard ConfigMap does not hold deploy/grafana/dashboards/tally.json with the grafana_dashboard label")
	}
	find(t, cms, "t-alert-rules")
}

// Bad values are refused at render time with a line that names them.
func TestHelmChartRefusesBadValues(t *testing.T) {
	bin := helmBin(t)
	for set, want := range map[string]string{
		"node.drain=500ms":                        "node.drain",
		"node.shutdownTimeout=abc":                "node.shutdownTimeout",
		"image.repository=":                       "image.repository",
		"publicUrl=vote.example.com":              "publicUrl",
		"publicUrl=https://vote.example.com/?a=b": "publicUrl",
		"ingress.enabled=true":                    "ingress.host",
		"ingress.enabled=true,ingress.host=v.example,ingress.region=mars": "ingress.region",
		"full.antiAffinity=sometimes":                                     "full.antiAffinity",
		"edge.spread.whenUnsatisfiable=Never,regions[0].name=r,regions[0].full.replicas=2,regions[0].edges.replicas=1,regions[0].edges.maxReplicas=0": "edge.spread.whenUnsatisfiable",
		"metrics.prometheusRule.enabled=maybe": "metrics.prometheusRule.enabled",
		"node.ackCopies=3":                     "node.ackCopies",
		"node.ackCopies=0":                     "node.ackCopies",
		"regions[0].name=r,regions[0].full.replicas=1,regions[0].edges.replicas=0,regions[0].edges.maxReplicas=0": "node.ackCopies 2 with 1 full node(s)",
	} {
		out, err := exec.Command(bin, "template", "t", chart, "--set", "image.repository=r", "--set", set).CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("--set %s: %v\n%s", set, err, out)
		}
	}
}

// The full nodes acknowledge a vote on two machines by default (two full
// nodes, --ack-copies=2); one full node runs only with node.ackCopies 1,
// which it says (TestHelmChartRefusesBadValues: the chart refuses it
// with 2).
func TestHelmChartKeepsTwoCopies(t *testing.T) {
	base := []string{"template", "t", chart, "--set", "image.repository=r"}
	def := string(runHelm(t, base...))
	if !strings.Contains(def, "replicas: 2") || !strings.Contains(def, "- --ack-copies=2") {
		t.Fatalf("the defaults do not run two full nodes with --ack-copies=2:\n%s", def)
	}
	one := string(runHelm(t, append(base, "--set", "node.ackCopies=1",
		"--set", "regions[0].name=local,regions[0].full.replicas=1,regions[0].edges.replicas=0,regions[0].edges.maxReplicas=0")...))
	if !strings.Contains(one, "- --ack-copies=1") || strings.Contains(one, "--ack-copies=2") {
		t.Fatalf("node.ackCopies=1 does not render --ack-copies=1")
	}
	notes := string(runHelm(t, "install", "t", chart, "--dry-run=client", "--set", "image.repository=r", "--set", "node.ackCopies=1",
		"--set", "regions[0].name=local,regions[0].full.replicas=1,regions[0].edges.replicas=0,regions[0].edges.maxReplicas=0"))
	if !strings.Contains(notes, "on one full node only") {
		t.Fatalf("the notes do not say a vote is on one machine:\n%s", notes)
	}
}
