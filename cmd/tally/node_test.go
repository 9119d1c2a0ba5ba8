package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"tally/node"
)

// startTestNode runs a single node on dataDir (admin token "tok") until
// the test ends, and returns its base URL once it answers.
func startTestNode(t *testing.T, dataDir string) string {
	t.Helper()
	base, _ := startTestNodeWith(t, dataDir, nil)
	return base
}

// startTestNodeWith is startTestNode with the config changed by set
// (when not nil); it returns the node too.
func startTestNodeWith(t *testing.T, dataDir string, set func(*node.Config)) (string, *node.Node) {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.DataDir, cfg.HTTPAddr, cfg.AdminToken, cfg.Demo = dataDir, "127.0.0.1:0", "tok", false
	cfg.GossipAddr, cfg.NATSAddr, cfg.NATSClusterAddr, cfg.NATSGatewayAddr, cfg.NATSLeafAddr = "127.0.0.1:0", "127.0.0.1:0", "", "", ""
	cfg.NodeName, cfg.CertifySettle, cfg.Region, cfg.Drain = "audit", 10*time.Millisecond, "eu-west", 0
	cfg.Logger, cfg.Stdout = slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard
	if set != nil {
		set(&cfg)
	}
	n, err := node.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	base := "http://" + n.Addr()
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get(base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return base, n
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("node not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// vote casts one vote over HTTP and fails the test unless it is accepted.
func vote(t *testing.T, base, poll, option, voter string) {
	t.Helper()
	res, err := http.Post(base+"/v1/polls/"+poll+"/votes", "application/json",
		strings.NewReader(`{"option":"`+option+`","voter":"`+voter+`","idem":"`+voter+`-`+option+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("vote %s/%s: %d", voter, option, res.StatusCode)
	}
}
