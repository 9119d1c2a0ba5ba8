package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
		{"the built-in figures", nil, 0, "figures: built in"},
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
		Night struct {
			WindowMs float64 `json:"window_ms"`
		} `json:"night"`
		Full, Edge struct {
			Count int     `json:"count"`
			Cores float64 `json:"cores"`
			RSS   float64 `json:"rss_bytes"`
		}
		Certify float64 `json:"certify_s"`
	}
	if err := json.Unmarshal(out.Bytes(), &p); err != nil || p.Full.Count != 1 || p.Edge.Count != 16 || !(p.Edge.Cores > 0) ||
		!(p.Edge.RSS > 0) || !(p.Certify > 0) || p.Night.WindowMs != 30_000 {
		t.Fatalf("--json: %+v %v\n%s", p, err, out.String())
	}
}

// fleetDocExample is a `tally fleet plan` command line in a doc's code
// block: its arguments after `tally`, the exit status the doc gives it (1
// when its comment says "exits 1", else 0), and where it is.
type fleetDocExample struct {
	args  []string
	code  int
	where string
}

// fleetDocExamples reads every `tally fleet plan` line (also as `go run
// ./cmd/tally fleet plan`) in the fenced code blocks of the doc at path.
func fleetDocExamples(t *testing.T, path string) []fleetDocExample {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ex []fleetDocExample
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		l := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		i := strings.Index(l, "tally fleet plan")
		if !fenced || i < 0 {
			continue
		}
		cmd, comment, _ := strings.Cut(l[i+len("tally "):], "#")
		code := 0
		if strings.Contains(comment, "exits 1") {
			code = 1
		}
		ex = append(ex, fleetDocExample{strings.Fields(cmd), code, filepath.Base(path) + ":" + strconv.Itoa(line)})
	}
	return ex
}

var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// jsonKeys is every key of the JSON value v, at any depth.
func jsonKeys(v any, into *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			*into = append(*into, k)
			jsonKeys(e, into)
		}
	case []any:
		for _, e := range v {
			jsonKeys(e, into)
		}
	}
}

// Every `tally fleet plan` example in docs/cli.md and docs/capacity.md
// runs as written from a directory that is not the repository (the
// figures are built in), with the exit status its doc gives it; with
// --json, its output is one JSON object whose keys are all snake_case.
func TestFleetPlanDocExamples(t *testing.T) {
	var ex []fleetDocExample
	for doc, least := range map[string]int{"../../docs/cli.md": 1, "../../docs/capacity.md": 3} {
		abs, err := filepath.Abs(doc)
		if err != nil {
			t.Fatal(err)
		}
		got := fleetDocExamples(t, abs)
		if len(got) < least {
			t.Fatalf("%s: %d fleet plan examples, want %d or more", doc, len(got), least)
		}
		ex = append(ex, got...)
	}
	t.Chdir(t.TempDir()) // no bench/fleet/figures.json here
	for _, e := range ex {
		t.Run(e.where, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(e.args, &out, &errb); code != e.code {
				t.Fatalf("%s: exit %d, the doc says %d; stderr %q", strings.Join(e.args, " "), code, e.code, errb.String())
			}
			if !strings.Contains(" "+strings.Join(e.args, " ")+" ", " --json ") {
				return
			}
			var v map[string]any
			if err := json.Unmarshal(out.Bytes(), &v); err != nil {
				t.Fatalf("--json: %v\n%s", err, out.String())
			}
			var keys []string
			jsonKeys(v, &keys)
			for _, k := range keys {
				if !snakeKey.MatchString(k) {
					t.Errorf("--json: key %q is not snake_case", k)
				}
			}
			if night, _ := v["night"].(map[string]any); night["window_ms"] == nil {
				t.Errorf("--json: no night.window_ms:\n%s", out.String())
			}
		})
	}
}
