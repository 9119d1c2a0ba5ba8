#!/usr/bin/env bash
# Fan-out benchmark for BENCHMARKS.md: node processes on loopback, viewer
# swarms (`tally watch --swarm`) from many 127.0.0.x source addresses, 40
# votes/s so every 250 ms tick carries a change (4 updates/s per viewer).
#
#   bench/fanout.sh [VIEWERS_PER_NODE] [NODES]     default: 18000 1
#
# A process may hold ~20,000 open files here, so each node serves at most
# ~19k viewers and each swarm process opens at most ~19k: 50,000 viewers
# take three nodes and three swarms (bench/fanout.sh 16667 3).
set -euo pipefail
cd "$(dirname "$0")/.."
per=${1:-18000}
nodes=${2:-1}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
go build -o "$tmp/node" ./cmd/node
go build -o "$tmp/tally" ./cmd/tally
for i in $(seq 1 "$nodes"); do
  "$tmp/node" --data-dir "$tmp/data$i" --http-addr "127.0.0.1:$((18180 + i))" --rate-ip 0 --rate-voter 0 --trust-floor 0 \
    --max-viewers $((per + 500)) > "$tmp/node$i.log" 2>&1 &
  pids+=($!)
done
for i in $(seq 1 "$nodes"); do
  until curl -sf "http://127.0.0.1:$((18180 + i))/readyz" >/dev/null; do sleep 0.2; done
done
for i in $(seq 1 "$nodes"); do
  # Each swarm uses its own range of source addresses (--per-ip viewers each).
  "$tmp/tally" watch --url "http://127.0.0.1:$((18180 + i))" --poll demo --swarm "$per" --ramp 20s --duration 20s \
    --server-pid "${pids[$((i - 1))]}" --source-offset $(( (i - 1) * 250 )) > "$tmp/swarm$i.out" 2> "$tmp/swarm$i.err" &
  spids+=($!)
done
wait "${spids[@]}"
for i in $(seq 1 "$nodes"); do echo "== node $i"; cat "$tmp/swarm$i.out"; done
