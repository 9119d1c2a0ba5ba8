// Command node runs one Tally node. `go run ./cmd/node` starts a node for
// region "local" with data in ./data and HTTP on :8080; --help lists every
// flag (each also reads TALLY_<NAME>).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"tally/node"
)

func main() {
	cfg := node.DefaultConfig()
	cfg.RegisterFlags(flag.CommandLine)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	followParent()
	n, err := node.New(cfg)
	if err == nil {
		err = n.Run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tally-node:", err)
		os.Exit(1)
	}
}
