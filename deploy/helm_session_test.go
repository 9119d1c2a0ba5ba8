package deploy

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"tally/node"
)

// podArgs returns the node configuration each full node's and edge's pod
// of ms runs with, by the object's name, parsed by the node's own flags.
func podArgs(t *testing.T, ms []manifest) map[string]node.Config {
	t.Helper()
	out := map[string]node.Config{}
	for _, m := range ms {
		if m.kind() != "StatefulSet" && m.kind() != "Deployment" {
			continue
		}
		var args []string
		for _, a := range list(dig(list(dig(m, "spec", "template", "spec", "containers"))[0], "args")) {
			args = append(args, strings.NewReplacer("$(POD_NAME)", "p-0", "$(POD_IP)", "10.1.2.3").Replace(str(a)))
		}
		cfg := node.DefaultConfig()
		fs := flag.NewFlagSet("node", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
			t.Fatalf("%s: the node refuses its arguments: %v %v", m.name(), err, fs.Args())
		}
		out[m.name()] = cfg
	}
	if len(out) == 0 {
		t.Fatal("no full node or edge rendered")
	}
	return out
}

// Every example the chart ships runs with voter sessions on every full
// node and every edge: the public one above all, whose Ingress any
// browser reaches. Its embedders are in --origins.
func TestHelmExamplesRequireVoterSessions(t *testing.T) {
	for _, f := range examples(t) {
		f := filepath.Base(f)
		t.Run(f, func(t *testing.T) {
			ms := render(t, f)
			pods := podArgs(t, ms)
			roles := map[string]int{}
			for name, cfg := range pods {
				roles[cfg.Role]++
				if !cfg.RequireSession {
					t.Errorf("%s (%s): no --require-session: its voters' ids would be whatever their requests say", name, cfg.Role)
				}
			}
			if roles["full"] == 0 || roles["edge"] == 0 {
				t.Errorf("want full nodes and edges checked, got %v", roles)
			}
			if f != "public.yaml" {
				return
			}
			for name, cfg := range pods {
				if len(cfg.Origins) == 0 || len(cfg.TrustedProxies) == 0 {
					t.Errorf("%s: --origins %v, --trusted-proxies %v: the public example names its embedders and its ingress's network", name, cfg.Origins, cfg.TrustedProxies)
				}
			}
		})
	}
}

// A public install (an Ingress, publicUrl or a LoadBalancer) with
// sessions off is refused with a line that names the values to set,
// unless allowAnonymousVoters says it is meant; then it renders, without
// --require-session, and the notes say loudly what that means. Without
// any way in from outside, sessions off render quietly but for a line.
func TestHelmChartRefusesPublicAnonymousVoters(t *testing.T) {
	bin := helmBin(t)
	off := "node.requireSession=false"
	for _, public := range []string{
		"ingress.enabled=true,ingress.host=vote.example.com,node.trustedProxies=10.0.0.0/8",
		"publicUrl=https://vote.example.com",
		"service.type=LoadBalancer",
		"service.type=NodePort",
	} {
		for _, sessionsOff := range []string{off, "node.extraArgs={--require-session=false}"} {
			set := public + "," + sessionsOff
			out, err := exec.Command(bin, "template", "t", chart, "--set", "image.repository=r", "--set", set).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "node.requireSession=true") || !strings.Contains(string(out), "allowAnonymousVoters=true") {
				t.Errorf("--set %s: rendered, or refused without naming node.requireSession and allowAnonymousVoters: %v\n%s", set, err, out)
			}
		}
		set := public + "," + off + ",allowAnonymousVoters=true"
		for name, cfg := range podArgs(t, renderSet(t, set)) {
			if cfg.RequireSession {
				t.Errorf("--set %s: %s runs with --require-session", set, name)
			}
		}
		notes := string(runHelm(t, "install", "t", chart, "--dry-run=client", "--set", "image.repository=r", "--set", set))
		if !strings.Contains(notes, "WARNING: ANONYMOUS VOTERS") || !strings.Contains(notes, "whatever the request says") {
			t.Errorf("--set %s: the notes do not warn about anonymous voters:\n%s", set, notes)
		}
	}
	// Sessions on, the warning is never there; sessions off with no way
	// in from outside (a studio's closed network) render, with a line.
	notes := string(runHelm(t, "install", "t", chart, "--dry-run=client", "--set", "image.repository=r",
		"--set", "ingress.enabled=true,ingress.host=vote.example.com,node.trustedProxies=10.0.0.0/8"))
	if strings.Contains(notes, "ANONYMOUS") || strings.Contains(notes, "Voter sessions are off") {
		t.Errorf("sessions on: the notes warn about anonymous voters:\n%s", notes)
	}
	notes = string(runHelm(t, "install", "t", chart, "--dry-run=client", "--set", "image.repository=r", "--set", off))
	if !strings.Contains(notes, "Voter sessions are off") || strings.Contains(notes, "WARNING: ANONYMOUS") {
		t.Errorf("sessions off, no way in from outside: want the quiet line, got:\n%s", notes)
	}
	for name, cfg := range podArgs(t, renderSet(t, off)) {
		if cfg.RequireSession {
			t.Errorf("node.requireSession=false: %s runs with --require-session", name)
		}
	}
	// The defaults require sessions, on every pod.
	for name, cfg := range podArgs(t, renderSet(t, "")) {
		if !cfg.RequireSession {
			t.Errorf("defaults: %s runs without --require-session", name)
		}
	}
}

// What else a public install needs for sessions to work: the session
// secret every full node shares (edges relay session requests and hold
// none); an Ingress's controller in --trusted-proxies, or every voter
// is one address to the token budget; a browser's write from an
// embedder's page only with the embedder in --origins, which takes host
// patterns, not addresses; the full nodes' Service keeping a client on
// one node, where a puzzle's challenge is redeemed.
func TestHelmChartPublicSessionsWork(t *testing.T) {
	bin := helmBin(t)
	for set, want := range map[string]string{
		"ingress.enabled=true,ingress.host=vote.example.com": "node.trustedProxies",
		"node.origins={https://www.example.com}":             "node.origins",
		"node.origins=www.example.com/embed":                 "node.origins",
		"node.origins={*}":                                   "every site",
		"node.origins={www.example.com,*:*}":                 "every site",
		"node.origins=*.com":                                 "every site",
		"node.requireSession=maybe":                          "node.requireSession",
		"allowAnonymousVoters=yes,node.requireSession=false,publicUrl=https://v.example": "allowAnonymousVoters",
	} {
		out, err := exec.Command(bin, "template", "t", chart, "--set", "image.repository=r", "--set", set).CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("--set %s: %v\n%s", set, err, out)
		}
	}
	ms := renderSet(t, "node.origins={www.example.com,*.example.org},regions[0].name=r,regions[0].full.replicas=2,regions[0].edges.replicas=1,regions[0].edges.maxReplicas=0")
	for name, cfg := range podArgs(t, ms) {
		if strings.Join(cfg.Origins, ",") != "www.example.com,*.example.org" {
			t.Errorf("%s: --origins %v", name, cfg.Origins)
		}
		switch {
		case cfg.Role == "full" && cfg.SessionSecretFile != "/etc/tally/secrets/session-secret":
			t.Errorf("%s: --session-secret-file %q: the full nodes must share the Secret's session-secret, or a token from one is refused at another", name, cfg.SessionSecretFile)
		case cfg.Role == "edge" && cfg.SessionSecretFile != "":
			t.Errorf("%s: an edge relays sessions and needs no secret, got %q", name, cfg.SessionSecretFile)
		}
	}
	if strings.Join(podArgs(t, renderSet(t, "node.origins=www.example.com"))["t-local"].Origins, ",") != "www.example.com" {
		t.Errorf("node.origins as a string: not --origins")
	}
	if svc := find(t, ms, "t-r-http"); dig(svc, "spec", "sessionAffinity") != "ClientIP" {
		t.Errorf("%s: sessionAffinity %v: a voter's challenge and its solution may land on two full nodes, and only the one that set the puzzle takes its solution", svc.name(), dig(svc, "spec", "sessionAffinity"))
	}
}

// renderSet renders the chart with one --set (none when "").
func renderSet(t *testing.T, set string) []manifest {
	t.Helper()
	args := []string{"template", "t", chart, "--namespace", "live", "--set", "image.repository=registry.example/tally"}
	if set != "" {
		args = append(args, "--set", set)
	}
	return decodeAll(t, runHelm(t, args...))
}

// decodeAll reads helm template's output into its manifests.
func decodeAll(t *testing.T, out []byte) []manifest {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(out))
	var ms []manifest
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return ms
		}
		if err != nil {
			t.Fatalf("rendered manifests: %v", err)
		}
		if m != nil {
			ms = append(ms, manifest(m))
		}
	}
}
