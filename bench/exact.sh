#!/usr/bin/env bash
# Exact live tally benchmarks for BENCHMARKS.md (issue 14), about 3 minutes:
#   1. live vs certified while votes flow across three regions, 100 ms RTT,
#      30% of changes of mind and retries at another region, and the time
#      from the last ack until every region is exact (in-process, go test);
#   2. the cost: a ballot's bytes on the wire, the voter state's heap per
#      voter, one ballot's apply;
#   3. durable votes/s of one node without and with the cross-region voter
#      state, side by side in one run: the node built from BASE (default
#      d4f1397, the commit before ballots) and from HEAD, each fresh, the same
#      generator (tally load, 64 connections, 10% changes of mind, 2%
#      retries), alternated A B A B so drift hits both.
# Nothing is asserted about time; the figures are printed.
#
#   bench/exact.sh            (DURATION=10s, BASE=d4f1397)
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${DURATION:-10s}
base=${BASE:-d4f1397}
filter() { grep -E '^(Benchmark|ok|FAIL|---)' || true; }

echo "== live vs certified, 3 regions, 100 ms RTT"
go test ./node -run '^$' -bench 'LiveExactness' -benchtime 1x -timeout 10m 2>&1 | filter
echo "== cost"
go test ./gossip -run '^$' -bench 'BallotWire' 2>&1 | filter
go test ./crdt -run '^$' -bench 'BallotsMemory' -benchtime 1x 2>&1 | filter
go test ./crdt -run '^$' -bench 'BallotsAdd' 2>&1 | filter

echo "== durable votes/s, one node: $base (per-region voter state) vs HEAD (cross-region ballots)"
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  git worktree remove --force "$tmp/base" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
git worktree add -q --detach "$tmp/base" "$base"
(cd "$tmp/base" && go build -o "$tmp/node-base" ./cmd/node)
go build -o "$tmp/node-head" ./cmd/node
go build -o "$tmp/tally" ./cmd/tally
field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p" | head -1; }
run() { # binary label round
  local bin=$1 label=$2 round=$3 dir="$tmp/data-$2-$3"
  "$bin" --data-dir "$dir" --http-addr 127.0.0.1:18181 --gossip-addr 127.0.0.1:0 --nats-addr 127.0.0.1:0 \
    --rate-ip 0 --rate-voter 0 --trust-floor 0 > "$tmp/$label-$round.log" 2>&1 &
  local pid=$!
  pids+=($pid)
  until curl -sf http://127.0.0.1:18181/readyz >/dev/null; do sleep 0.2; done
  local cpu0; cpu0=$(awk '{print $14 + $15}' /proc/$pid/stat)
  "$tmp/tally" load --url http://127.0.0.1:18181 --batch 1 --rate 0 --connections 64 --duration "$dur" --json 2>/dev/null > "$tmp/r.json"
  local cpu1; cpu1=$(awk '{print $14 + $15}' /proc/$pid/stat)
  local vps; vps=$(field votes_per_sec < "$tmp/r.json")
  local acked; acked=$(field votes < "$tmp/r.json")
  awk -v l="$label" -v r="$round" -v v="$vps" -v c="$((cpu1 - cpu0))" -v a="${acked:-0}" -v p50="$(field p50_ms < "$tmp/r.json")" -v p99="$(field p99_ms < "$tmp/r.json")" \
    'BEGIN { us = (a > 0) ? c * 10000 / a : 0; printf "| %s | %d | %.0f | %s / %s | %.1f |\n", l, r, v, p50, p99, us }'
  kill "$pid"; wait "$pid" 2>/dev/null || true
}
echo "| node | round | durable votes/s | p50 / p99 ms | node CPU µs per acked vote |"
echo "| --- | ---: | ---: | --- | ---: |"
for round in 1 2; do
  run "$tmp/node-base" "before ($base)" "$round"
  run "$tmp/node-head" "HEAD" "$round"
done
