#!/usr/bin/env bash
# Ingest benchmark for BENCHMARKS.md: the node's durable vote path (single
# votes, batches of 10) side by side with the bare-HTTP ceiling, all driven
# by the same generator (tally load, vegeta) on this machine. For each row:
# the max rate (closed model: --connections workers as fast as answers come)
# and latency at 70% of it (open model, constant arrival rate). Then the
# node's RSS after 1,000,000 votes from 1,000,000 distinct voters.
#
#   bench/ingest.sh            (DURATION=10s by default)
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${DURATION:-10s}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
go build -o "$tmp/node" ./cmd/node
go build -o "$tmp/tally" ./cmd/tally
go build -o "$tmp/bare" ./bench/bare

"$tmp/node" --data-dir "$tmp/data" --http-addr 127.0.0.1:18081 --rate-ip 0 --rate-voter 0 > "$tmp/node.log" 2>&1 &
node=$!; pids+=($node)
"$tmp/bare" --addr 127.0.0.1:18090 > "$tmp/bare.log" 2>&1 &
pids+=($!)
until curl -sf http://127.0.0.1:18081/readyz >/dev/null; do sleep 0.2; done
until curl -s -o /dev/null http://127.0.0.1:18090/; do sleep 0.2; done

field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p" | head -1; }
row() { # name url batch
  local name=$1 url=$2 batch=$3
  "$tmp/tally" load --url "$url" --batch "$batch" --rate 0 --connections 64 --duration "$dur" --json 2>/dev/null > "$tmp/max.json"
  local rps vps p50 p99 p999
  rps=$(field requests_per_sec < "$tmp/max.json"); vps=$(field votes_per_sec < "$tmp/max.json")
  p50=$(field P50Ms < "$tmp/max.json"); p99=$(field P99Ms < "$tmp/max.json"); p999=$(field P999Ms < "$tmp/max.json")
  local r70; r70=$(awk -v r="$rps" 'BEGIN { printf "%d", r * 0.7 }')
  "$tmp/tally" load --url "$url" --batch "$batch" --rate "$r70" --connections 64 --duration "$dur" --json 2>/dev/null > "$tmp/r70.json"
  printf "| %s | %.0f | %.0f | %s / %s / %s | %d | %s / %s / %s |\n" "$name" "$rps" "$vps" "$p50" "$p99" "$p999" "$r70" \
    "$(field P50Ms < "$tmp/r70.json")" "$(field P99Ms < "$tmp/r70.json")" "$(field P999Ms < "$tmp/r70.json")"
}
echo "| row | max req/s | max votes/s | p50 / p99 / p99.9 ms at max | 70% rate req/s | p50 / p99 / p99.9 ms at 70% |"
echo "| --- | ---: | ---: | --- | ---: | --- |"
row "bare HTTP ceiling (decode + ack)" http://127.0.0.1:18090 1
row "node, durable, single votes" http://127.0.0.1:18081 1
row "node, durable, batches of 10" http://127.0.0.1:18081 10

# Memory: 1,000,000 votes from 1,000,000 distinct voters into a fresh poll.
curl -sf -X POST http://127.0.0.1:18081/v1/polls -H 'Content-Type: application/json' \
  -H "Authorization: Bearer $(cat "$tmp/data/admin-token")" \
  -d '{"id":"mem","question":"Memory?","options":[{"id":"red","label":"Red"},{"id":"green","label":"Green"},{"id":"blue","label":"Blue"},{"id":"gold","label":"Gold"}],"duration_s":3600}' >/dev/null
before=$(awk '/VmRSS/ {print $2}' /proc/$node/status)
"$tmp/tally" load --url http://127.0.0.1:18081 --poll mem --batch 10 --voters 1000000 --changes 0 --retries 0 \
  --rate 2000 --duration 50s --connections 128 --json 2>/dev/null > "$tmp/mem.json"
after=$(awk '/VmRSS/ {print $2}' /proc/$node/status)
total=$(curl -sf http://127.0.0.1:18081/v1/polls/mem | sed -n 's/.*"total":\([0-9]*\).*/\1/p')
echo
echo "node RSS: $((before / 1024)) MB before, $((after / 1024)) MB after $total counted votes from distinct voters in poll mem"
