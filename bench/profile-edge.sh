#!/usr/bin/env bash
# Where an edge's CPU goes (issue 61): a full node and an edge (--role
# edge) on loopback, as bench/relay.sh runs them, and a CPU profile of the
# edge (go tool pprof, its --debug-addr) under each of its two hot paths:
#
#   1. socket votes: `tally load --socket` on 1,000 live sockets at $RATE
#      votes/s through the edge (relayed to the full node);
#   2. fan-out: $VIEWERS viewers (`tally watch --swarm`) on the edge's
#      live stream while the swarm's votes (40/s) change every 250 ms tick.
#
# It prints each profile's top functions (flat and cumulative) and keeps
# the profiles in $OUT (default: a temporary directory, removed). Loopback:
# a sender's write also runs the receiver's TCP path, so the kernel's
# share is higher than on a real NIC.
#
#   ./bench/profile-edge.sh      (RATE=2000 VIEWERS=5000 SECONDS_=10 OUT=dir)
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${RATE:-2000}
viewers=${VIEWERS:-5000}
secs=${SECONDS_:-10}
. bench/lib.sh # $tmp, $pids and their cleanup, $tmp/node, $tmp/tally
out=${OUT:-$tmp/profiles}
mkdir -p "$out"
head -c 32 /dev/urandom | base64 > "$tmp/key"
common=(--ack-copies 1 --rate-ip 0 --rate-voter 0 --trust-floor 0 --pow-bits 0 --demo=false --gossip-key-file "$tmp/key"
  --gossip-profile local --nats-gateway-addr '' --max-viewers-per-ip 100000 --max-viewers $((viewers + 1000)))
"$tmp/node" --data-dir "$tmp/full" --http-addr 127.0.0.1:18381 --nats-addr 127.0.0.1:18382 --gossip-addr 127.0.0.1:18383 \
  --nats-cluster-addr 127.0.0.1:18384 --nats-leaf-addr 127.0.0.1:18385 --region eu-west --node-name full "${common[@]}" > "$tmp/full.log" 2>&1 &
full=$!; pids+=($full)
until curl -sf http://127.0.0.1:18381/readyz >/dev/null; do kill -0 $full || { cat "$tmp/full.log"; exit 1; }; sleep 0.2; done
"$tmp/node" --role edge --data-dir "$tmp/edge" --http-addr 127.0.0.1:18391 --nats-addr 127.0.0.1:18392 --gossip-addr 127.0.0.1:18393 \
  --join 127.0.0.1:18383 --region eu-west --node-name edge --debug-addr 127.0.0.1:18399 "${common[@]}" > "$tmp/edge.log" 2>&1 &
edge=$!; pids+=($edge)
until curl -sf http://127.0.0.1:18391/readyz >/dev/null; do kill -0 $edge || { cat "$tmp/edge.log"; exit 1; }; sleep 0.2; done
curl -sf -X POST http://127.0.0.1:18381/v1/polls -H 'Content-Type: application/json' \
  -H "Authorization: Bearer $(cat "$tmp/full/admin-token")" \
  -d '{"id":"p","question":"Where does the time go?","options":[{"id":"red","label":"Red"},{"id":"green","label":"Green"},{"id":"blue","label":"Blue"},{"id":"gold","label":"Gold"}],"duration_s":3600}' >/dev/null
until curl -sf http://127.0.0.1:18391/v1/polls/p >/dev/null; do sleep 0.2; done

top() { go tool pprof -top -nodecount=30 "$1" 2>/dev/null | sed -n '1,40p'; }

echo "== 1. socket votes through the edge: $rate/s on 1,000 sockets for ${secs}s"
"$tmp/tally" load --url http://127.0.0.1:18391 --poll p --rate "$rate" --duration "$((secs + 4))s" --socket --connections 1000 --json > "$tmp/load.json" 2>/dev/null &
load=$!
sleep 2
curl -sf -o "$out/edge-socket-votes.pprof" "http://127.0.0.1:18399/debug/pprof/profile?seconds=$secs"
wait $load
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%d votes acked, p50 %.1f ms, p99 %.1f ms" % (r["votes"], r["p50_ms"], r["p99_ms"]))' "$tmp/load.json"
top "$out/edge-socket-votes.pprof"

echo
echo "== 2. fan-out: $viewers viewers on the edge, votes at 40/s"
# The swarm sends its own 40 votes/s (through the edge), as bench/fanout.sh's.
"$tmp/tally" watch --url http://127.0.0.1:18391 --poll p --swarm "$viewers" --ramp 10s --duration "$((secs + 4))s" \
  --server-pid "$edge" --json > "$tmp/swarm.json" 2>/dev/null &
swarm=$!
sleep 12
curl -sf -o "$out/edge-fanout.pprof" "http://127.0.0.1:18399/debug/pprof/profile?seconds=$secs"
wait $swarm || true
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("swarm: %s" % {k: r[k] for k in r if k in ("connected","frames","missed","cpu_per_frame_us","rss_per_viewer_kb")})' "$tmp/swarm.json" || true
top "$out/edge-fanout.pprof"
[ -n "${OUT:-}" ] && echo "profiles kept in $out"
exit 0
