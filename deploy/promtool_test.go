package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// promtool finds Prometheus's checker: skipped where it is missing,
// except in CI (.ci/run installs it).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is missing; .ci/run installs it (Debian package prometheus)")
		}
		t.Skip("promtool not installed (apt-get install prometheus); the rules and the config are not checked")
	}
	return p
}

// TestPromtoolChecksRulesAndConfig runs `promtool check rules` on the
// alert rules and `promtool check config` on the Prometheus configuration
// (with the rules at their path in the repository).
func TestPromtoolChecksRulesAndConfig(t *testing.T) {
	bin := promtool(t)
	rules := filepath.Join(root, "deploy/prometheus/alerts.yml")
	if out, err := exec.Command(bin, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy/prometheus/prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(rules)
	cfg := strings.ReplaceAll(string(b), "/etc/prometheus/alerts.yml", abs)
	if cfg == string(b) {
		t.Fatal("prometheus.yml does not load /etc/prometheus/alerts.yml")
	}
	path := filepath.Join(t.TempDir(), "prometheus.yml")
	os.WriteFile(path, []byte(cfg), 0o644)
	if out, err := exec.Command(bin, "check", "config", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}
