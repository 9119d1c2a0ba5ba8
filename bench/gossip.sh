#!/usr/bin/env bash
# Gossip benchmarks for BENCHMARKS.md (about 6 minutes on 2 cores):
#   - vote acked at region A → seen by a viewer at region C, 100 ms RTT
#     between regions (NATS supercluster through delaying proxies);
#   - convergence after a partition heals, with NATS and with memberlist only;
#   - payload bytes per second each node sends, by nodes (3, 5, 10) and
#     open polls (1, 100), busy and idle.
# Everything runs in-process on loopback; the figures are printed, nothing
# is asserted about time.
set -euo pipefail
cd "$(dirname "$0")/.."
filter() { grep -E '^(Benchmark|ok|FAIL|---)' || true; }
go test ./node -run '^$' -bench 'VoteToViewerAcrossRegions' -benchtime "${VOTE_RUNS:-1}x" -timeout 30m 2>&1 | filter
go test ./gossip -run '^$' -bench 'ConvergenceAfterHeal' -benchtime "${HEAL_RUNS:-5}x" -timeout 30m 2>&1 | filter
go test ./gossip -run '^$' -bench 'GossipBytes' -benchtime 1x -timeout 30m 2>&1 | filter
