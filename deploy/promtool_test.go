package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
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
// as it stands in the repository (its rules path is relative to it).
func TestPromtoolChecksRulesAndConfig(t *testing.T) {
	bin := promtool(t)
	rules := filepath.Join(root, "deploy/prometheus/alerts.yml")
	if out, err := exec.Command(bin, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	// As an operator runs it, from the repository: the rules are found
	// beside the config, as in the container's /etc/prometheus.
	path := filepath.Join(root, "deploy/prometheus/prometheus.yml")
	if out, err := exec.Command(bin, "check", "config", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}

// TestPromtoolAlertRuleUnitTests runs the alert rules' unit tests
// (deploy/prometheus/alerts_test.yml): each tested rule fires on the
// series it is for and stays quiet on the others.
func TestPromtoolAlertRuleUnitTests(t *testing.T) {
	bin := promtool(t)
	tests := filepath.Join(root, "deploy/prometheus/alerts_test.yml")
	if out, err := exec.Command(bin, "test", "rules", tests).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}
