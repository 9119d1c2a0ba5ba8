#!/usr/bin/env bash
# The lean vote path (issue 15), side by side in one run with wrk (a
# lighter generator than vegeta): the node's CPU per durable single vote
# against the bare decode-and-ack server's CPU per request (bench/usual
# --store none, the same decoder), and a fresh node's first 5 s on a new
# poll against its warm rate. Installs wrk when missing.
#
#   ./bench/lean.sh      (DURATION=10s, CONNECTIONS=64)
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${DURATION:-10s}
conns=${CONNECTIONS:-64}
if ! command -v wrk >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
. bench/lib.sh # $tmp, $pids and their cleanup, $tmp/node
go build -o "$tmp/usual" ./bench/usual
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # clock ticks, 100 a second

# wrk_row NAME PID URL DURATION: requests/s and the server's CPU µs a request.
wrk_row() {
  local name=$1 pid=$2 url=$3 d=$4 c0 c1 out reqs rps
  c0=$(cpu "$pid")
  out=$(wrk -t2 -c"$conns" -d"$d" --latency -s bench/wrk/vote.lua "$url")
  c1=$(cpu "$pid")
  reqs=$(echo "$out" | awk '/requests in/ {print $1}')
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  non2xx=$(echo "$out" | awk '/Non-2xx/ {print $5}')
  p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
  awk -v n="$name" -v r="$rps" -v q="$reqs" -v c="$((c1 - c0))" -v p="$p99" -v e="${non2xx:-0}" \
    'BEGIN { printf "| %s | %.0f | %.1f | %s | %s |\n", n, r, c * 10000 / q, p, e }'
}
node() { # start a fresh node on DIR; prints its pid
  "$tmp/node" --data-dir "$1" --http-addr 127.0.0.1:18181 --gossip-addr 127.0.0.1:0 --nats-addr 127.0.0.1:0 \
    --rate-ip 0 --rate-voter 0 --trust-floor 0 --demo=false > "$1.log" 2>&1 &
  echo $!
}
poll() { # create poll $1 on the node
  curl -sf -X POST http://127.0.0.1:18181/v1/polls -H 'Content-Type: application/json' \
    -H "Authorization: Bearer $(cat "$tmp/data/admin-token")" \
    -d "{\"id\":\"$1\",\"question\":\"Lean?\",\"options\":[{\"id\":\"red\",\"label\":\"Red\"},{\"id\":\"green\",\"label\":\"Green\"},{\"id\":\"blue\",\"label\":\"Blue\"},{\"id\":\"gold\",\"label\":\"Gold\"}],\"duration_s\":3600}" >/dev/null
}

"$tmp/usual" --store none --addr 127.0.0.1:18190 > "$tmp/bare.log" 2>&1 &
bare=$!; pids+=($bare)
pid=$(node "$tmp/data"); pids+=($pid)
until curl -sf http://127.0.0.1:18181/readyz >/dev/null; do sleep 0.2; done
until curl -s -o /dev/null http://127.0.0.1:18190/; do sleep 0.2; done
poll cold

echo "| row | requests/s | server CPU µs per request | p99 | non-2xx |"
echo "| --- | ---: | ---: | --- | ---: |"
wrk_row "node, new poll, first 5 s (cold)" "$pid" http://127.0.0.1:18181/v1/polls/cold/votes 5s
wrk_row "node, same poll, next $dur (warm)" "$pid" http://127.0.0.1:18181/v1/polls/cold/votes "$dur"
wrk_row "bare decode + ack" "$bare" http://127.0.0.1:18190/v1/polls/cold/votes "$dur"
wrk_row "node, warm, again" "$pid" http://127.0.0.1:18181/v1/polls/cold/votes "$dur"
wrk_row "bare decode + ack, again" "$bare" http://127.0.0.1:18190/v1/polls/cold/votes "$dur"

# Memory: RSS of the node per voter after 1,000,000 votes from 1,000,000
# distinct voters into a fresh poll (batches of 10 at 2,000 requests/s).
go build -o "$tmp/tally" ./cmd/tally
poll mem
before=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
"$tmp/tally" load --url http://127.0.0.1:18181 --poll mem --batch 10 --voters 1000000 --changes 0 --retries 0 \
  --rate 2000 --duration 50s --connections 128 --json 2>/dev/null > "$tmp/mem.json"
after=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
total=$(curl -sf http://127.0.0.1:18181/v1/polls/mem | sed -n 's/.*"total":\([0-9]*\).*/\1/p')
echo
awk -v b="$before" -v a="$after" -v t="$total" 'BEGIN { printf "node RSS: %d MB before, %d MB after %d counted votes from distinct voters: %.0f bytes per voter\n", b/1024, a/1024, t, (a-b)*1024/t }'
