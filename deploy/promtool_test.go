package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"go.yaml.in/yaml/v3"
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

// TestEveryAlertHasUnitTests: every alert rule of
// deploy/prometheus/alerts.yml has a case in alerts_test.yml where it
// fires (an alert_rule_test naming it with exp_alerts, whose labels and
// annotations promtool then compares) and one where it does not (empty
// exp_alerts); and every alertname there names a rule, since promtool
// passes a case about an alert that does not exist when it expects none.
// It needs no promtool: it reads the two files.
func TestEveryAlertHasUnitTests(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy/prometheus/alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				EvalTime  string           `yaml:"eval_time"`
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	b, err = os.ReadFile(filepath.Join(root, "deploy/prometheus/alerts_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tests.RuleFiles, []string{"alerts.yml"}) {
		t.Errorf("alerts_test.yml loads %v, want the rules beside it (alerts.yml)", tests.RuleFiles)
	}
	alerts := map[string]bool{}
	var names []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts[r.Alert] = true
				names = append(names, r.Alert)
			}
		}
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTest {
			if !alerts[at.Alertname] {
				t.Errorf("alerts_test.yml: a case at %s names alert %q, which alerts.yml does not define", at.EvalTime, at.Alertname)
				continue
			}
			if len(at.ExpAlerts) == 0 {
				quiet[at.Alertname]++
			} else {
				fires[at.Alertname]++
			}
		}
	}
	for _, a := range names {
		if fires[a] == 0 {
			t.Errorf("alert %s: no case in deploy/prometheus/alerts_test.yml where it fires (an alert_rule_test with exp_alerts naming it)", a)
		}
		if quiet[a] == 0 {
			t.Errorf("alert %s: no case in deploy/prometheus/alerts_test.yml where it does not fire (exp_alerts: [])", a)
		}
	}
	if len(names) < 16 {
		t.Errorf("only %d alerts in deploy/prometheus/alerts.yml", len(names))
	}
}

// TestAlertsHaveRunbooks: every alert rule carries a runbook_url
// annotation "docs/operations.md#<anchor>" whose anchor is a heading of
// docs/operations.md (as GitHub renders it), so that a page leads to what
// to do.
func TestAlertsHaveRunbooks(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy/prometheus/alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := markdownAnchors(string(doc))
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			u := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(u, "docs/operations.md#")
			if !ok {
				t.Errorf("alert %s: runbook_url %q does not point into docs/operations.md", r.Alert, u)
				continue
			}
			if !anchors[anchor] {
				t.Errorf("alert %s: runbook_url %q: docs/operations.md has no heading with anchor %q", r.Alert, u, anchor)
			}
		}
	}
	if alerts < 16 {
		t.Errorf("only %d alerts in deploy/prometheus/alerts.yml", alerts)
	}
}

// markdownAnchors returns the anchors GitHub gives a Markdown file's
// headings: lower case, punctuation dropped, spaces as hyphens, "-1",
// "-2" … after a repeated one. Lines in fenced code blocks are no
// headings.
func markdownAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		if text == "" || strings.TrimLeft(line, "#")[0] != ' ' {
			continue
		}
		var slug strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				slug.WriteRune(r)
			}
		}
		a := slug.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}
