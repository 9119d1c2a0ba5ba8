// Command tally-node runs one Tally node. `go run ./cmd/node` starts a node
// for region "local" with data in ./data and HTTP on :8080.
//
//	tally-node [flags]             run a node; --help lists every flag (each
//	                               also reads TALLY_<NAME>, and --config FILE
//	                               reads them from a YAML file)
//	tally-node healthcheck [--url] exit 0 when the node's /readyz answers 200
//	tally-node --version           print the build
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"tally/internal/buildinfo"
	"tally/internal/flagerr"
	"tally/node"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: tally-node [flags]
       tally-node healthcheck [--url URL]
       tally-node --version

Runs one Tally node. Every flag can also be set by its TALLY_<NAME>
variable or in the YAML file --config names (keys are the flags' names);
a flag wins over the environment, which wins over the file.

flags:
`

// newFlagSet returns the node's flags: every setting of cfg, --config and
// --version (the flag table of docs/running.md is tested against it).
func newFlagSet(cfg *node.Config) (fs *flag.FlagSet, configFile *string, version *bool) {
	fs = flag.NewFlagSet("tally-node", flag.ContinueOnError)
	cfg.RegisterFlags(fs) // the settings, each also read from TALLY_<NAME>
	// Not settings: registered after, so no TALLY_VERSION (an image tag,
	// say) is taken for --version; $TALLY_CONFIG is read here alone.
	configFile = fs.String("config", os.Getenv("TALLY_CONFIG"), "YAML file of settings, keyed by flag name (data-dir: /data) [$TALLY_CONFIG]")
	version = fs.Bool("version", false, "print the version and exit")
	return fs, configFile, version
}

// run runs the node, or one of the small commands, and returns the exit
// status: 0 after a clean stop, 1 when the node fails, 2 on a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "healthcheck" {
		return healthcheck(args[1:], stdout, stderr)
	}
	cfg := node.DefaultConfig()
	fs, configFile, version := newFlagSet(&cfg)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	// --help goes to stdout with exit 0; a bad flag to stderr with exit 2.
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		stdout.Write(out.Bytes())
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "tally-node: %v (tally-node --help lists the flags)\n", flagerr.Describe(fs, err))
		return 2
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "tally-node: unexpected argument %q (tally-node --help lists the flags)\n", fs.Arg(0))
		return 2
	case *version:
		fmt.Fprintln(stdout, "tally-node", buildinfo.Read())
		return 0
	}
	if *configFile != "" {
		if err := cfg.ApplyFile(fs, *configFile); err != nil {
			fmt.Fprintln(stderr, "tally-node:", err)
			return 2
		}
	}
	logger, err := cfg.NewLogger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "tally-node:", err)
		return 2
	}
	slog.SetDefault(logger)
	cfg.Logger = logger
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	followParent()
	tuneGC(cfg.Role)
	n, err := node.Open(cfg)
	if err == nil {
		err = n.Run(ctx)
	}
	if err != nil {
		// One line, for the operator at 3 a.m.; the log has the detail. In
		// JSON mode it is a log line like the others, for the shipper.
		if cfg.LogFormat == "json" {
			logger.Error("tally-node stopped", "err", strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			fmt.Fprintln(stderr, "tally-node:", strings.ReplaceAll(err.Error(), "\n", " "))
		}
		if errors.Is(err, node.ErrConfig) {
			return 2 // a setting, as a bad flag or file line is
		}
		return 1
	}
	return 0
}
