package fleet

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

// The figures carried in the binary are the bench's file, byte for byte
// (bench/fleet-figures.sh writes both), and they plan the seed's night.
func TestDefaultFiguresAreTheBenchFile(t *testing.T) {
	bench, err := os.ReadFile("../bench/fleet/figures.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bench, figuresJSON) {
		t.Fatal("fleet/figures.json differs from bench/fleet/figures.json: copy it (bench/fleet-figures.sh writes both)")
	}
	f, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Make(seedNight(), f); err != nil {
		t.Fatalf("the seed's night from the built-in figures: %v", err)
	}
}

var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// snakeKeys fails t for any key of v (decoded JSON), at any depth, that
// is not snake_case.
func snakeKeys(t *testing.T, path string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if !snake.MatchString(k) {
				t.Errorf("key %s%q is not snake_case", path, k)
			}
			snakeKeys(t, path+k+".", e)
		}
	case []any:
		for _, e := range v {
			snakeKeys(t, path, e)
		}
	}
}

// A plan's JSON is snake_case, its durations in milliseconds.
func TestPlanJSONIsSnakeCase(t *testing.T) {
	p, err := Make(seedNight(), testFigures())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	snakeKeys(t, "", m)
	night, _ := m["night"].(map[string]any)
	if night["window_ms"] != 30000.0 || night["tick_ms"] != 1000.0 || night["settle_ms"] != 1000.0 || night["ack_copies"] != 2.0 {
		t.Fatalf("night: %v", night)
	}
	full, _ := m["full"].(map[string]any)
	if full["count"] != float64(p.Full.Count) || full["rss_bytes"] != p.Full.RSS || m["certify_s"] != p.Certify || m["ack_p99_ms"] != p.AckP99 {
		t.Fatalf("plan: %s", b)
	}
}
