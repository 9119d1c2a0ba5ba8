package node

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// parseWith runs the binary's order: flags registered (the environment
// applied), the command line parsed, then the file.
func parseWith(t *testing.T, file string, args ...string) (Config, error) {
	t.Helper()
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("tally-node", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tally.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	err := cfg.ApplyFile(fs, path)
	return cfg, err
}

func TestConfigFilePrecedence(t *testing.T) {
	file := "region: from-file\nnode-name: file-node\ndata-dir: /from/file\norigins: [a.example.com, '*.b.example.org']\ntick: 100ms\nlog-format: json\n"
	t.Setenv("TALLY_NODE_NAME", "env-node")
	t.Setenv("TALLY_DATA_DIR", "/from/env")
	cfg, err := parseWith(t, file, "--data-dir", "/from/flag")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "from-file" || cfg.NodeName != "env-node" || cfg.DataDir != "/from/flag" {
		t.Fatalf("region %q (want the file's), node %q (want the env's), data dir %q (want the flag's)", cfg.Region, cfg.NodeName, cfg.DataDir)
	}
	if cfg.Tick != 100*time.Millisecond || cfg.LogFormat != "json" || strings.Join(cfg.Origins, ",") != "a.example.com,*.b.example.org" {
		t.Fatalf("tick %v, log format %q, origins %v", cfg.Tick, cfg.LogFormat, cfg.Origins)
	}
	if _, err := parseWith(t, ""); err != nil {
		t.Fatalf("an empty file: %v", err)
	}
	if _, err := parseWith(t, "# nothing but a comment\n"); err != nil {
		t.Fatalf("a comment-only file: %v", err)
	}
}

func TestConfigFileRefusesMistakes(t *testing.T) {
	for name, file := range map[string]string{
		"unknown key":     "regoin: eu-west\n",
		"bad duration":    "tick: fast\n",
		"bad number":      "max-viewers: many\n",
		"bad bool":        "demo: perhaps\n",
		"twice":           "region: a\nregion: b\n",
		"nested":          "limits:\n  ip: 3\n",
		"not a mapping":   "- region\n- eu-west\n",
		"null value":      "region:\n",
		"config in file":  "config: other.yaml\n",
		"bad origin":      "origins: [https://x.example.com/]\n",
		"comma in a list": "origins: ['a.example.com,b.example.com']\n",
		"not yaml":        "region: [unclosed\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseWith(t, file)
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("got %v, want ErrConfig", err)
			}
			if !strings.Contains(err.Error(), "--config") || strings.Contains(err.Error(), "parse error") {
				t.Fatalf("the error does not name the file, or not what is expected: %v", err)
			}
		})
	}
	if _, err := parseWith(t, "tick: fast\n"); err == nil || !strings.Contains(err.Error(), `:1: tick "fast": want a duration such as 250ms`) {
		t.Fatalf("a bad duration in the file: %v", err)
	}
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := cfg.ApplyFile(fs, filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, ErrConfig) {
		t.Fatalf("a missing file: %v", err)
	}
}

func TestLogSettings(t *testing.T) {
	for _, c := range []struct {
		format, level string
		ok            bool
	}{{"text", "info", true}, {"json", "debug", true}, {"json", "WARN", true}, {"", "", true}, {"xml", "info", false}, {"text", "loud", false}} {
		cfg := Config{LogFormat: c.format, LogLevel: c.level}
		_, err := cfg.NewLogger(io.Discard)
		if (err == nil) != c.ok {
			t.Errorf("format %q level %q: %v", c.format, c.level, err)
		}
	}
}

// TestJSONLogsSayDurations: a duration in a JSON log line reads as one
// ("1.5s"), not as bare nanoseconds.
func TestJSONLogsSayDurations(t *testing.T) {
	var b bytes.Buffer
	c := Config{LogFormat: "json"}
	l, err := c.NewLogger(&b)
	if err != nil {
		t.Fatal(err)
	}
	l.Info("done", "took", 1500*time.Millisecond)
	if !strings.Contains(b.String(), `"took":"1.5s"`) {
		t.Fatalf("log line %s", b.String())
	}
}

// A Config's zero PowBits is the default puzzle, not none: a Config built
// by hand runs as the binary does. --pow-bits 0 (and TALLY_POW_BITS=0)
// still means no puzzle.
func TestPowBitsZeroIsTheDefault(t *testing.T) {
	var hand Config
	hand.fillDefaults()
	if hand.PowBits != DefaultConfig().PowBits || hand.PowBits == 0 {
		t.Fatalf("a hand-built Config runs with %d puzzle bits, want the default %d", hand.PowBits, DefaultConfig().PowBits)
	}
	for _, c := range []struct {
		args []string
		env  string
		want int
	}{{nil, "", DefaultConfig().PowBits}, {[]string{"--pow-bits", "0"}, "", NoPuzzle}, {nil, "0", NoPuzzle}, {[]string{"--pow-bits", "20"}, "", 20}} {
		t.Setenv("TALLY_POW_BITS", c.env)
		if c.env == "" {
			os.Unsetenv("TALLY_POW_BITS")
		}
		cfg := DefaultConfig()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		cfg.RegisterFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if cfg.PowBits != c.want || cfg.Validate() != nil {
			t.Errorf("%v, env %q: PowBits %d (%v), want %d", c.args, c.env, cfg.PowBits, cfg.Validate(), c.want)
		}
	}
	bad := DefaultConfig()
	for _, bits := range []int{-2, 33} {
		if bad.PowBits = bits; !errors.Is(bad.Validate(), ErrConfig) {
			t.Errorf("PowBits %d: %v, want ErrConfig", bits, bad.Validate())
		}
	}
}
