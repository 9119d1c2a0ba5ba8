package deploy

import (
	"flag"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"

	"tally/node"
)

const root = ".." // the repository, where docker compose runs

type service struct {
	Build           any               `yaml:"build"`
	Image           string            `yaml:"image"`
	Pid             string            `yaml:"pid"`
	Command         []string          `yaml:"command"`
	EnvFile         string            `yaml:"env_file"`
	Environment     map[string]string `yaml:"environment"`
	Ports           []string          `yaml:"ports"`
	Volumes         []string          `yaml:"volumes"`
	DependsOn       dependsOn         `yaml:"depends_on"`
	Secrets         []string          `yaml:"secrets"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	Healthcheck     *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

// dependsOn reads both forms of depends_on: a list of services, or a map
// of service to condition.
type dependsOn []string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	var list []string
	if err := n.Decode(&list); err == nil {
		*d = list
		return nil
	}
	var m map[string]struct {
		Condition string `yaml:"condition"`
	}
	if err := n.Decode(&m); err != nil {
		return err
	}
	for k := range m {
		*d = append(*d, k)
	}
	slices.Sort(*d)
	return nil
}

type compose struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

func load(t *testing.T) compose {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docker-compose.multi.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// envFile reads KEY=VALUE lines.
func envFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s:%d: not KEY=VALUE: %q", path, i+1, line)
		}
		env[k] = v
	}
	return env
}

// nodeConfig applies TALLY_* variables to the node's flags, as the binary
// does, failing on any variable that names no flag.
func nodeConfig(t *testing.T, where string, env map[string]string) node.Config {
	t.Helper()
	cfg := node.DefaultConfig()
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.RegisterFlags(fs)
	for k, v := range env {
		name, ok := strings.CutPrefix(k, "TALLY_")
		if !ok {
			t.Errorf("%s: %s is not a TALLY_ variable", where, k)
			continue
		}
		flagName := strings.ToLower(strings.ReplaceAll(name, "_", "-"))
		if fs.Lookup(flagName) == nil {
			t.Errorf("%s: %s names no node flag (--%s)", where, k, flagName)
			continue
		}
		if err := fs.Set(flagName, v); err != nil {
			t.Errorf("%s: %s=%q: %v", where, k, v, err)
		}
	}
	return cfg
}

func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return p
}

// TestComposeAgreesWithTheNode checks every file, port, host and variable
// that docker-compose.multi.yml and the files it names refer to.
func TestComposeAgreesWithTheNode(t *testing.T) {
	c := load(t)
	secretFile := regexp.MustCompile(`^/run/secrets/([a-z_]+)$`)
	natsPorts := map[string]*server.Options{} // service → its parsed config
	httpPorts := map[string]string{}          // tally service → HTTP port
	metricsPorts := map[string]string{}       // tally service → where /metrics is served
	gossipPorts := map[string]string{}        // tally service → memberlist port
	var tallies, edges []string               // full nodes, edges
	for name, s := range c.Services {
		for _, d := range s.DependsOn {
			if _, ok := c.Services[d]; !ok {
				t.Errorf("%s depends on unknown service %s", name, d)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, "./") {
				if _, err := os.Stat(filepath.Join(root, src)); err != nil {
					t.Errorf("%s mounts missing file %s", name, src)
				}
			} else if strings.HasPrefix(src, "/") {
				// The host's own files (node-exporter's /): read-only.
				if parts := strings.Split(v, ":"); len(parts) != 3 || !slices.Contains(strings.Split(parts[2], ","), "ro") {
					t.Errorf("%s mounts the host's %s writable: %s", name, src, v)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				t.Errorf("%s mounts undeclared volume %s", name, src)
			}
		}
		if strings.HasPrefix(name, "nats-") {
			if !slices.Equal(s.Command, []string{"-c", "/etc/nats/nats.conf"}) {
				t.Errorf("%s: command %v", name, s.Command)
			}
			src, _, _ := strings.Cut(s.Volumes[0], ":")
			opts, err := server.ProcessConfigFile(filepath.Join(root, src))
			if err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			natsPorts[name] = opts
		}
		if strings.HasPrefix(name, "tally-") {
			tallies = append(tallies, name)
		}
		if strings.HasPrefix(name, "edge-") {
			edges = append(edges, name)
		}
	}
	if len(tallies) != 3 || len(natsPorts) != 3 || len(edges) != 3 {
		t.Fatalf("want three regions of NATS, a full node and an edge, got %v, %v and %d NATS", tallies, edges, len(natsPorts))
	}
	configs := map[string]node.Config{}
	for _, name := range append(slices.Clone(tallies), edges...) {
		s := c.Services[name]
		edge := strings.HasPrefix(name, "edge-")
		if s.Build != "." {
			t.Errorf("%s builds %v, want the repository's Dockerfile", name, s.Build)
		}
		env := envFile(t, s.EnvFile)
		// Secrets are Docker secrets files: each variable names one the
		// service mounts, kept in ./secrets/ (ignored by git and builds).
		// The test stands in for them with files of its own.
		secretsDir := t.TempDir()
		for k, v := range s.Environment {
			m := secretFile.FindStringSubmatch(v)
			if m == nil || !strings.HasSuffix(k, "_FILE") || !slices.Contains(s.Secrets, m[1]) {
				t.Errorf("%s: %s=%q: want a TALLY_*_FILE naming one of its secrets %v", name, k, v, s.Secrets)
				continue
			}
			if src := c.Secrets[m[1]].File; !strings.HasPrefix(src, "./secrets/") {
				t.Errorf("%s: secret %s comes from %q, not ./secrets/", name, m[1], src)
			}
			content := "operator-value-of-enough-length"
			if k == "TALLY_GOSSIP_KEY_FILE" {
				content = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // any 32-byte key
			}
			p := filepath.Join(secretsDir, m[1])
			if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			env[k] = p
		}
		for _, k := range []string{"TALLY_GOSSIP_KEY", "TALLY_ADMIN_TOKEN", "TALLY_SESSION_SECRET"} {
			if _, ok := env[k]; ok {
				t.Errorf("%s: %s is a plain variable; secrets go in files", name, k)
			}
		}
		if s.Healthcheck == nil || !slices.Equal(s.Healthcheck.Test, []string{"CMD", "/usr/local/bin/tally-node", "healthcheck"}) {
			t.Errorf("%s: no healthcheck running tally-node healthcheck", name)
		}
		cfg := nodeConfig(t, name, env)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: the node refuses its configuration: %v", name, err)
		}
		_, region, _ := strings.Cut(name, "-")
		if cfg.Region != region || cfg.NodeName != name {
			t.Errorf("%s: region %q, node name %q", name, cfg.Region, cfg.NodeName)
		}
		switch {
		case !edge && (cfg.Role != "full" || cfg.GossipKey == "" || cfg.AdminToken == "" || cfg.SessionSecret == ""):
			t.Errorf("%s: a full node, with the gossip key, admin token and session secret: role %q", name, cfg.Role)
		case edge && (cfg.Role != "edge" || cfg.GossipKey == "" || slices.Contains(s.Secrets, "admin_token")):
			// An edge needs the key only: the full nodes answer admin
			// calls and issue and check voter tokens.
			t.Errorf("%s: an edge, with the gossip key and no admin token: role %q, secrets %v", name, cfg.Role, s.Secrets)
		case edge && !slices.Contains(s.DependsOn, "tally-"+region):
			t.Errorf("%s does not start after its region's full node", name)
		}
		// Docker must wait out the drain and the shutdown before it kills.
		grace, err := time.ParseDuration(s.StopGracePeriod)
		if err != nil || grace <= cfg.Drain+cfg.ShutdownTimeout {
			t.Errorf("%s: stop_grace_period %q, want more than --drain %v + --shutdown-timeout %v", name, s.StopGracePeriod, cfg.Drain, cfg.ShutdownTimeout)
		}
		httpPorts[name], gossipPorts[name] = port(t, cfg.HTTPAddr), port(t, cfg.GossipAddr)
		metricsPorts[name] = httpPorts[name]
		if cfg.AdminAddr != "" {
			metricsPorts[name] = port(t, cfg.AdminAddr)
		}
		if len(s.Ports) != 1 || !strings.HasSuffix(s.Ports[0], ":"+httpPorts[name]) {
			t.Errorf("%s publishes %v, but the node serves HTTP on %s", name, s.Ports, cfg.HTTPAddr)
		}
		u, err := url.Parse(cfg.NATSURL)
		if err != nil || u.Scheme != "nats" {
			t.Fatalf("%s: NATS URL %q", name, cfg.NATSURL)
		}
		opts, ok := natsPorts[u.Hostname()]
		if !ok || u.Port() != strconv.Itoa(opts.Port) {
			t.Errorf("%s: NATS URL %s is no NATS service's client port", name, cfg.NATSURL)
		} else if opts.Gateway.Name != region || opts.Cluster.Name != region {
			t.Errorf("%s talks to NATS of region %q", name, opts.Gateway.Name)
		}
		if !slices.Contains(s.DependsOn, u.Hostname()) {
			t.Errorf("%s does not depend on its NATS %s", name, u.Hostname())
		}
		configs[name] = cfg
	}
	for name, cfg := range configs {
		seeds := cfg.Join
		if len(seeds) != len(tallies) {
			t.Errorf("%s joins %v", name, seeds)
		}
		for _, seed := range seeds {
			h, p, err := net.SplitHostPort(seed)
			if err != nil || gossipPorts[h] != p || !slices.Contains(tallies, h) {
				t.Errorf("%s: seed %s is no full node's gossip address", name, seed)
			}
		}
	}
	// The gateways form a supercluster: each NATS names every region at
	// another service's gateway port.
	for name, opts := range natsPorts {
		var names []string
		for _, gw := range opts.Gateway.Gateways {
			names = append(names, gw.Name)
			for _, u := range gw.URLs {
				peer, ok := natsPorts[u.Hostname()]
				if !ok || u.Port() != strconv.Itoa(peer.Gateway.Port) || peer.Gateway.Name != gw.Name {
					t.Errorf("%s: gateway %s at %s is not that region's gateway", name, gw.Name, u)
				}
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"ap-south", "eu-west", "us-east"}) {
			t.Errorf("%s: gateways %v", name, names)
		}
	}
	// Prometheus scrapes every node where it serves /metrics (its
	// --admin-addr when it has one), in job tally, the job the alert rules
	// watch; and the host's node_exporter in job node.
	jobs := prometheusJobs(t)
	scraped := map[string]bool{}
	for job := range jobs {
		if job != "tally" && job != "node" {
			t.Errorf("prometheus scrapes job %s: want tally (the nodes) and node (node_exporter) only", job)
		}
	}
	for _, target := range jobs["tally"] {
		h, p, _ := net.SplitHostPort(target)
		if metricsPorts[h] != p {
			t.Errorf("prometheus target %s is not where the node serves /metrics", target)
		}
		scraped[h] = true
	}
	for name := range configs {
		if !scraped[name] {
			t.Errorf("prometheus does not scrape %s in job tally", name)
		}
	}
	checkNodeExporter(t, c, jobs["node"])
}

// prometheusJobs reads deploy/prometheus/prometheus.yml: each scrape
// job's static targets.
func prometheusJobs(t *testing.T) map[string][]string {
	t.Helper()
	var prom struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy/prometheus/prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &prom); err != nil {
		t.Fatal(err)
	}
	jobs := map[string][]string{}
	for _, sc := range prom.ScrapeConfigs {
		if _, ok := jobs[sc.JobName]; ok {
			t.Errorf("prometheus.yml: job %s twice", sc.JobName)
		}
		jobs[sc.JobName] = []string{}
		for _, st := range sc.StaticConfigs {
			jobs[sc.JobName] = append(jobs[sc.JobName], st.Targets...)
		}
	}
	return jobs
}

// checkNodeExporter: the compose Prometheus's job node scrapes the
// compose file's node_exporter, the only source of the node_filesystem_*
// series TallyDiskFilling reads there (Tally exports no disk metric). It
// is a pinned prom/node-exporter on its default port, sees the host's
// root read-only at --path.rootfs, and shares the host's PID namespace:
// it reads the mount table of PID 1, so the filesystem holding the
// volumes is reported read-write as the host mounts it, not as the
// read-only bind mount it has of it, which the rule skips
// (node_filesystem_readonly == 0; deploy/prometheus/alerts_test.yml has
// the series it then reports).
func checkNodeExporter(t *testing.T, c compose, targets []string) {
	t.Helper()
	if len(targets) != 1 {
		t.Fatalf("prometheus job node scrapes %v: want the compose file's node_exporter", targets)
	}
	h, p, err := net.SplitHostPort(targets[0])
	s, ok := c.Services[h]
	if err != nil || !ok || p != "9100" {
		t.Fatalf("prometheus job node scrapes %s: no compose service serves node_exporter there", targets[0])
	}
	if !regexp.MustCompile(`^prom/node-exporter:v[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(s.Image) {
		t.Errorf("%s: image %q, want prom/node-exporter at a pinned version", h, s.Image)
	}
	if s.Pid != "host" {
		t.Errorf("%s: pid %q, want host: in its own PID namespace it reports the host's root as its read-only bind mount, which TallyDiskFilling skips", h, s.Pid)
	}
	var rootfs string
	for _, arg := range s.Command {
		if v, ok := strings.CutPrefix(arg, "--path.rootfs="); ok {
			rootfs = v
		}
		if strings.HasPrefix(arg, "--web.listen-address") {
			t.Errorf("%s: %s: the job scrapes the default port, 9100", h, arg)
		}
	}
	if rootfs == "" || rootfs == "/" || !slices.ContainsFunc(s.Volumes, func(v string) bool { return strings.HasPrefix(v, "/:"+rootfs+":ro") }) {
		t.Errorf("%s: --path.rootfs %q and volumes %v: want the host's / mounted read-only at --path.rootfs", h, rootfs, s.Volumes)
	}
	if len(s.Ports) != 0 {
		t.Errorf("%s publishes %v: Prometheus reaches it on the compose network", h, s.Ports)
	}
}

// TestDockerfile checks the image build: multi-stage, static, the node as
// entry point, its ports exposed, its ENV names real flags.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if n := strings.Count(text, "\nFROM "); n < 2 {
		t.Errorf("want a multi-stage build, got %d FROM lines", n)
	}
	for _, want := range []string{"CGO_ENABLED=0", "./cmd/node", "./cmd/tally", `ENTRYPOINT ["/usr/local/bin/tally-node"]`, "EXPOSE 8080 7946 7946/udp 4222 6222 7222 7422",
		`HEALTHCHECK --interval=5s --timeout=3s --start-period=60s --retries=3 CMD ["/usr/local/bin/tally-node", "healthcheck"]`, "STOPSIGNAL SIGTERM"} {
		if !strings.Contains(text, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	env := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "ENV "); ok {
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		}
	}
	cfg := nodeConfig(t, "Dockerfile", env)
	if port(t, cfg.HTTPAddr) != "8080" || port(t, cfg.GossipAddr) != "7946" {
		t.Errorf("Dockerfile ENV: http %s gossip %s", cfg.HTTPAddr, cfg.GossipAddr)
	}
}

// TestBuildContextKeepsSecretsOut: the image build and git leave out the
// data dir (admin token, session secret, ledger), secrets, exports and
// backups.
func TestBuildContextKeepsSecretsOut(t *testing.T) {
	for file, want := range map[string][]string{
		".dockerignore": {".git", "data/", "secrets/", "exports/", "backups/"},
		".gitignore":    {"/data/", "/secrets/", "/exports/", "/backups/"},
	} {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for _, w := range want {
			if !slices.Contains(lines, w) {
				t.Errorf("%s does not list %s", file, w)
			}
		}
	}
}

// TestGrafanaProvisioning: the datasource the dashboard names is the one
// provisioned, and the dashboards are mounted where the provider reads.
func TestGrafanaProvisioning(t *testing.T) {
	var ds struct {
		Datasources []struct {
			UID, Type, URL string
		} `yaml:"datasources"`
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy/grafana/provisioning/datasources/prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &ds); err != nil || len(ds.Datasources) != 1 {
		t.Fatalf("datasources: %v %+v", err, ds)
	}
	u, err := url.Parse(ds.Datasources[0].URL)
	c := load(t)
	if err != nil || c.Services[u.Hostname()].Image == "" || !strings.HasSuffix(c.Services["prometheus"].Ports[0], ":"+u.Port()) {
		t.Errorf("datasource URL %s is not the prometheus service", ds.Datasources[0].URL)
	}
	var dash struct {
		Panels []struct {
			Title      string
			Datasource struct{ UID string }
			Targets    []struct{ Expr string }
		}
	}
	b, err = os.ReadFile(filepath.Join(root, "deploy/grafana/dashboards/tally.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &dash); err != nil { // JSON is YAML
		t.Fatal(err)
	}
	queries := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			queries++
			if p.Datasource.UID != ds.Datasources[0].UID || tg.Expr == "" {
				t.Errorf("panel %q: datasource %q, expr %q", p.Title, p.Datasource.UID, tg.Expr)
			}
		}
	}
	if queries < 20 {
		t.Errorf("the dashboard has %d queries", queries)
	}
	var prov struct {
		Providers []struct {
			Options struct{ Path string }
		}
	}
	b, _ = os.ReadFile(filepath.Join(root, "deploy/grafana/provisioning/dashboards/tally.yml"))
	if err := yaml.Unmarshal(b, &prov); err != nil || len(prov.Providers) != 1 {
		t.Fatalf("dashboard provider: %v", err)
	}
	if !slices.Contains(c.Services["grafana"].Volumes, "./deploy/grafana/dashboards:"+prov.Providers[0].Options.Path+":ro") {
		t.Errorf("grafana does not mount the dashboards at %s: %v", prov.Providers[0].Options.Path, c.Services["grafana"].Volumes)
	}
}

// TestMultiHostVariant checks deploy/multi-host: with the example region
// file filled in, the node accepts its configuration; it announces the
// public address; it publishes the gossip (TCP and UDP), route and gateway
// ports it listens on, metrics only on the private address; its secrets
// and certificates are files; TLS is on across hosts.
func TestMultiHostVariant(t *testing.T) {
	dir := filepath.Join(root, "deploy/multi-host")
	vars := envFile(t, "deploy/multi-host/region.env.example")
	b, err := os.ReadFile(filepath.Join(dir, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// Compose's interpolation: ${X:?msg} must be set, ${X:-def} defaults.
	interp := regexp.MustCompile(`\$\{([A-Z_]+)(:\?[^}]*|:-[^}]*)?\}`)
	text := interp.ReplaceAllStringFunc(string(b), func(m string) string {
		p := interp.FindStringSubmatch(m)
		v, ok := vars[p[1]]
		switch {
		case ok:
			return v
		case strings.HasPrefix(p[2], ":-"):
			return strings.TrimPrefix(p[2], ":-")
		}
		t.Errorf("%s is required but region.env.example does not set it", p[1])
		return ""
	})
	var c compose
	if err := yaml.Unmarshal([]byte(text), &c); err != nil {
		t.Fatal(err)
	}
	s, ok := c.Services["tally"]
	if !ok || len(c.Services) != 1 {
		t.Fatalf("want one tally service, got %v", c.Services)
	}
	env := map[string]string{}
	secretsDir := t.TempDir()
	secretFile := regexp.MustCompile(`^/run/secrets/([a-z_]+)$`)
	for k, v := range s.Environment {
		if m := secretFile.FindStringSubmatch(v); m != nil {
			if !slices.Contains(s.Secrets, m[1]) || !strings.HasPrefix(c.Secrets[m[1]].File, "../../secrets/") {
				t.Errorf("%s names secret %s, which is not a mounted file under ./secrets/", k, m[1])
			}
			content := "operator-value-of-enough-length"
			if k == "TALLY_GOSSIP_KEY_FILE" {
				content = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
			}
			v = filepath.Join(secretsDir, m[1])
			os.WriteFile(v, []byte(content), 0o600)
		}
		env[k] = v
	}
	cfg := nodeConfig(t, "multi-host", env)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the node refuses the multi-host configuration: %v", err)
	}
	if cfg.TLSCert == "" || cfg.TLSKey == "" || cfg.TLSCA == "" {
		t.Error("TLS is off between hosts")
	}
	if cfg.GossipKey == "" || cfg.AdminToken == "" || cfg.SessionSecret == "" || !cfg.RequireSession {
		t.Error("the cluster key, admin token, session secret and --require-session are all needed on the Internet")
	}
	h, p, err := net.SplitHostPort(cfg.GossipAdvertise)
	if err != nil || h != vars["TALLY_PUBLIC_IP"] || p != port(t, cfg.GossipAddr) {
		t.Errorf("announces %q, want the public IP at the gossip port %s", cfg.GossipAdvertise, cfg.GossipAddr)
	}
	published := map[string]bool{}
	for _, p := range s.Ports {
		parts := strings.Split(p, ":")
		if len(parts) == 3 && parts[0] != vars["TALLY_PRIVATE_IP"] {
			t.Errorf("port %s is bound to %s, not the private address", p, parts[0])
		}
		published[parts[len(parts)-1]] = true
		if len(parts) == 3 {
			published["private:"+parts[len(parts)-1]] = true
		}
	}
	for _, want := range []string{port(t, cfg.HTTPAddr), port(t, cfg.GossipAddr) + "/tcp", port(t, cfg.GossipAddr) + "/udp",
		port(t, cfg.NATSClusterAddr), port(t, cfg.NATSGatewayAddr), "private:" + port(t, cfg.AdminAddr)} {
		if !published[want] {
			t.Errorf("port %s is not published as it should be: %v", want, s.Ports)
		}
	}
	if len(cfg.Join) < 2 {
		t.Errorf("joins %q: seeds in every region expected", cfg.Join)
	}
	grace, err := time.ParseDuration(s.StopGracePeriod)
	if err != nil || grace <= cfg.Drain+cfg.ShutdownTimeout {
		t.Errorf("stop_grace_period %q", s.StopGracePeriod)
	}
	if s.Healthcheck == nil || !slices.Equal(s.Healthcheck.Test, []string{"CMD", "/usr/local/bin/tally-node", "healthcheck"}) {
		t.Error("no healthcheck")
	}
	ignored, _ := os.ReadFile(filepath.Join(root, ".gitignore"))
	if !strings.Contains(string(ignored), "/deploy/multi-host/region.env") {
		t.Error("region.env is not ignored by git")
	}
}
