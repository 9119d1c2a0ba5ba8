#!/usr/bin/env bash
# Ingest benchmark for BENCHMARKS.md. Side by side, with the same generator
# (tally load, vegeta) and the same request shape on this machine:
#   1. the node's durable vote path, single votes;   2. the same, batches of 10;
#   3. the bare-HTTP ceiling (decode + ack: bench/usual --store none);
#   4. the usual stack: Redis running one Lua vote script per vote behind the
#      same HTTP front (bench/usual), with appendfsync always, then without
#      persistence;   5. the naive design: PostgreSQL, UPDATE … + 1 per vote.
# For each row: the max rate (closed model, 64 connections) and latency at
# 70% of it (open model), and the ratio to the ceiling and to Redis. Then the
# node's RSS after 1,000,000 votes from 1,000,000 distinct voters. Installs
# redis-server and postgresql when missing; stops everything it started.
#
#   bench/ingest.sh            (DURATION=10s by default)
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${DURATION:-10s}
if ! command -v redis-server >/dev/null || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq redis-server postgresql >/dev/null
fi
tmp=$(mktemp -d)
chmod 755 "$tmp"
pids=()
pgbin=$(ls -d /usr/lib/postgresql/*/bin | tail -1)
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -d "$tmp/pg" ] && su postgres -c "$pgbin/pg_ctl -D $tmp/pg -m fast stop" >/dev/null 2>&1 || true
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
go build -o "$tmp/node" ./cmd/node
go build -o "$tmp/tally" ./cmd/tally
go build -o "$tmp/usual" ./bench/usual

"$tmp/node" --data-dir "$tmp/data" --http-addr 127.0.0.1:18081 --rate-ip 0 --rate-voter 0 --trust-floor 0 > "$tmp/node.log" 2>&1 &
node=$!; pids+=($node)
"$tmp/usual" --store none --addr 127.0.0.1:18090 > "$tmp/bare.log" 2>&1 &
pids+=($!)
until curl -sf http://127.0.0.1:18081/readyz >/dev/null; do sleep 0.2; done
until curl -s -o /dev/null http://127.0.0.1:18090/; do sleep 0.2; done

field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p" | head -1; }
declare -A max
lines=()
row() { # key name url batch
  local key=$1 name=$2 url=$3 batch=$4
  "$tmp/tally" load --url "$url" --batch "$batch" --rate 0 --connections 64 --duration "$dur" --json 2>/dev/null > "$tmp/max.json"
  local rps vps r70
  rps=$(field requests_per_sec < "$tmp/max.json"); vps=$(field votes_per_sec < "$tmp/max.json")
  max[$key]=$vps
  r70=$(awk -v r="$rps" 'BEGIN { printf "%d", r * 0.7 }')
  "$tmp/tally" load --url "$url" --batch "$batch" --rate "$r70" --connections 64 --duration "$dur" --json 2>/dev/null > "$tmp/r70.json"
  lines+=("$key|$name|$vps|$(field p50_ms < "$tmp/max.json") / $(field p99_ms < "$tmp/max.json") / $(field p999_ms < "$tmp/max.json")|$r70|$(field p50_ms < "$tmp/r70.json") / $(field p99_ms < "$tmp/r70.json") / $(field p999_ms < "$tmp/r70.json")")
}
redis() { # key name persistence-args…
  local key=$1 name=$2; shift 2
  redis-server --port 6390 --bind 127.0.0.1 --dir "$tmp" --save '' "$@" > "$tmp/redis.log" 2>&1 &
  local rp=$!
  until redis-cli -p 6390 ping >/dev/null 2>&1; do sleep 0.1; done
  "$tmp/usual" --store redis --redis 127.0.0.1:6390 --addr 127.0.0.1:18091 > "$tmp/usual.log" 2>&1 &
  local up=$!
  until curl -s -o /dev/null http://127.0.0.1:18091/; do sleep 0.2; done
  row "$key" "$name" http://127.0.0.1:18091 1
  kill "$up" "$rp"; wait "$up" "$rp" 2>/dev/null || true
}

row bare "bare HTTP ceiling (decode + ack)" http://127.0.0.1:18090 1
row node1 "node, durable, single votes" http://127.0.0.1:18081 1
row node10 "node, durable, batches of 10" http://127.0.0.1:18081 10
redis redis_fsync "Redis + Lua per vote, appendfsync always" --appendonly yes --appendfsync always
redis redis_mem "Redis + Lua per vote, no persistence" --appendonly no

mkdir "$tmp/pg" && chown postgres "$tmp/pg"
su postgres -c "$pgbin/initdb -D $tmp/pg -A trust -U postgres" >/dev/null
su postgres -c "$pgbin/pg_ctl -D $tmp/pg -o '-p 5439 -k $tmp/pg -c listen_addresses=127.0.0.1 -c max_connections=200' -l $tmp/pg/server.log -w start" >/dev/null
"$pgbin/psql" -h 127.0.0.1 -p 5439 -U postgres -qc "CREATE DATABASE tally" >/dev/null
"$tmp/usual" --store postgres --postgres "postgres://postgres@127.0.0.1:5439/tally" --addr 127.0.0.1:18092 > "$tmp/pgfront.log" 2>&1 &
pids+=($!)
until curl -s -o /dev/null http://127.0.0.1:18092/; do sleep 0.2; done
row pg "PostgreSQL, UPDATE votes = votes + 1 per vote" http://127.0.0.1:18092 1

echo "| row | max votes/s | ×ceiling | ×Redis (fsync) | p50 / p99 / p99.9 ms at max | 70% rate req/s | p50 / p99 / p99.9 ms at 70% |"
echo "| --- | ---: | ---: | ---: | --- | ---: | --- |"
for l in "${lines[@]}"; do
  IFS='|' read -r key name vps lmax r70 l70 <<< "$l"
  awk -v n="$name" -v v="$vps" -v c="${max[bare]}" -v r="${max[redis_fsync]}" -v a="$lmax" -v b="$r70" -v d="$l70" \
    'BEGIN { printf "| %s | %.0f | %.2f | %.2f | %s | %s | %s |\n", n, v, v / c, v / r, a, b, d }'
done

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

# The wrk rows (a lighter generator than vegeta): node and bare server side
# by side, CPU per request, cold and warm (bench/lean.sh, on other ports).
echo
./bench/lean.sh
