package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// tally fleet plan: the model's fleet, or its figures at counts given
// (--full, --edges), as text or JSON; bad input is one line and exit 2, a
// night that fits no fleet exit 1.
func TestFleetPlan(t *testing.T) {
	const figures = "--figures=../../bench/fleet/figures.json"
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stdout, or in the one line of stderr
	}{
		{"the seed's night", []string{figures}, 0, "per region:"},
		{"counts given", []string{figures, "--full", "2", "--edges", "16"}, 0, "per region: 2 full node(s), 16 edge(s)"},
		{"one count alone", []string{figures, "--full", "1"}, 2, "give both"},
		{"counts that do not fit", []string{figures, "--full", "1", "--edges", "1"}, 1, "does not fit: 1666667 viewers an edge"},
		{"a count out of range", []string{figures, "--full", "1", "--edges", "-3"}, 2, "edge(s) a region"},
		{"NaN votes", []string{figures, "--votes", "NaN"}, 2, "votes"},
		{"no figures", []string{"--figures", "/nonexistent/figures.json"}, 2, "fleet-figures.sh"},
		{"does not fit", []string{figures, "--viewers", "1e10", "--cores", "1", "--memory", "1"}, 1, "does not fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(append([]string{"fleet", "plan"}, tc.args...), &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out.String(), errb.String())
			}
			got := out.String()
			if code != 0 {
				got = errb.String()
				if strings.Count(strings.TrimSpace(got), "\n") != 0 {
					t.Fatalf("stderr is not one line: %q", got)
				}
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("output lacks %q:\n%s", tc.want, got)
			}
		})
	}
	var out, errb bytes.Buffer
	if code := run([]string{"fleet", "plan", figures, "--full", "1", "--edges", "16", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errb.String())
	}
	var p struct {
		Full, Edge struct {
			Count int
			Cores float64
		}
		Certify float64
	}
	if err := json.Unmarshal(out.Bytes(), &p); err != nil || p.Full.Count != 1 || p.Edge.Count != 16 || !(p.Edge.Cores > 0) || !(p.Certify > 0) {
		t.Fatalf("--json: %+v %v\n%s", p, err, out.String())
	}
}
