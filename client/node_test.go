package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"tally/node"
)

// adminToken is the test nodes' admin token.
const adminToken = "tok"

// runNode runs a real single node on a fresh data dir until stop is
// called, and returns its base URL once it is ready.
func runNode(mutate func(*node.Config)) (base string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "tally-client-")
	if err != nil {
		return "", nil, err
	}
	cfg := node.DefaultConfig()
	cfg.DataDir, cfg.HTTPAddr, cfg.AdminToken, cfg.Demo = dir, "127.0.0.1:0", adminToken, false
	cfg.GossipAddr, cfg.NATSAddr, cfg.NATSClusterAddr, cfg.NATSGatewayAddr = "127.0.0.1:0", "127.0.0.1:0", "", ""
	cfg.NodeName, cfg.CertifySettle, cfg.Region, cfg.Drain = "client-test", 10*time.Millisecond, "eu-west", 0
	cfg.Logger, cfg.Stdout = slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard
	if mutate != nil {
		mutate(&cfg)
	}
	n, err := node.Open(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	stop = func() { cancel(); <-done; os.RemoveAll(dir) }
	base = "http://" + n.Addr()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) { // wait for /readyz, bounded
		if res, err := http.Get(base + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return base, stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("the node was not ready within 20 s")
		}
	}
}

// startNode is runNode for a test: the node stops when the test ends.
func startNode(t testing.TB, mutate func(*node.Config)) string {
	t.Helper()
	base, stop, err := runNode(mutate)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return base
}
