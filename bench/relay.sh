#!/usr/bin/env bash
# The edge tier's vote path (issue 29), side by side in one run: a full
# node's CPU per vote when its votes come as direct single-vote HTTP, and
# when they come through an edge (--role edge) that batches them into relay
# messages, at the same steady rate; the edge's own CPU per vote beside
# its floors at that rate (issue 61), both served by bench/usual --store
# none: the bare decode-and-ack HTTP server's CPU per request, and the
# bare socket reader's per message on the same number of live sockets
# (each message read, decoded into a struct and acknowledged, nothing
# else: no frames of the poll, so the edge's frames to its sockets count
# in the edge's figure, not in the floor's), with the ratios of the edge
# to each (the socket target: 1.5× at most); the ack latency through the
# edge, for HTTP votes and for votes on live sockets; memory per viewer
# at the edge; and the full node's highest rate when fed relay batches by
# bench/relayload (standing in for many edges), with records per fsync.
# Loopback: a sender's write also runs the receiver's TCP path (a server's
# ack pays for tally load's receive; tally load's vote pays for the
# server's), so per-request CPU on each side is not what it is on a real
# NIC; the floors are measured the same way, so the ratios compare like
# with like.
#
#   ./bench/relay.sh      (RATE=8000, DURATION=10s)
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${RATE:-8000}
dur=${DURATION:-10s}
. bench/lib.sh # $tmp, $pids and their cleanup, $tmp/node, $tmp/tally
go build -o "$tmp/usual" ./bench/usual
go build -o "$tmp/relayload" ./bench/relayload
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # clock ticks, 100 a second
head -c 32 /dev/urandom | base64 > "$tmp/key"
# --ack-copies 1: these figures are of one full node; bench/copies.sh
# measures the second copy (issue 48).
common=(--ack-copies 1 --rate-ip 0 --rate-voter 0 --trust-floor 0 --pow-bits 0 --demo=false --gossip-key-file "$tmp/key" --gossip-profile local --nats-gateway-addr '')
"$tmp/node" --data-dir "$tmp/full" --http-addr 127.0.0.1:18281 --nats-addr 127.0.0.1:18282 --gossip-addr 127.0.0.1:18283 \
  --nats-cluster-addr 127.0.0.1:18284 --nats-leaf-addr 127.0.0.1:18285 --region eu-west --node-name full "${common[@]}" > "$tmp/full.log" 2>&1 &
full=$!; pids+=($full)
until curl -sf http://127.0.0.1:18281/readyz >/dev/null; do kill -0 $full || { cat "$tmp/full.log"; exit 1; }; sleep 0.2; done
"$tmp/node" --role edge --data-dir "$tmp/edge" --http-addr 127.0.0.1:18291 --nats-addr 127.0.0.1:18292 --gossip-addr 127.0.0.1:18293 \
  --join 127.0.0.1:18283 --region eu-west --node-name edge "${common[@]}" > "$tmp/edge.log" 2>&1 &
edge=$!; pids+=($edge)
until curl -sf http://127.0.0.1:18291/readyz >/dev/null; do kill -0 $edge || { cat "$tmp/edge.log"; exit 1; }; sleep 0.2; done
"$tmp/usual" --store none --addr 127.0.0.1:18299 > "$tmp/bare.log" 2>&1 &
bare=$!; pids+=($bare)
until curl -s -o /dev/null http://127.0.0.1:18299/; do sleep 0.2; done
curl -sf -X POST http://127.0.0.1:18281/v1/polls -H 'Content-Type: application/json' \
  -H "Authorization: Bearer $(cat "$tmp/full/admin-token")" \
  -d '{"id":"p","question":"Relay?","options":[{"id":"red","label":"Red"},{"id":"green","label":"Green"},{"id":"blue","label":"Blue"},{"id":"gold","label":"Gold"}],"duration_s":3600}' >/dev/null
until curl -sf http://127.0.0.1:18291/v1/polls/p >/dev/null; do sleep 0.2; done
fmetric() { curl -s http://127.0.0.1:18281/metrics | awk -v m="$1" '$1 == m { print $2 }'; }
emetric() { curl -s http://127.0.0.1:18291/metrics | awk -v m="$1" '$1 == m { print $2 }'; }

# row NAME URL [FLAGS]: a steady load at $rate; the full node's, the
# edge's and the bare server's CPU µs per vote sent (or request; nearly
# all acknowledged: see the votes/s column),
# p50/p99; the three CPU figures are kept in $row_full, $row_edge and
# $row_bare. FLAGS go to tally load (--socket: votes as messages on 1,000
# live sockets, as the page sends them).
# frames: the edge's frames written to viewers (all transports).
frames() { curl -s http://127.0.0.1:18291/metrics | awk '$1 ~ /^tally_frames_sent_total/ { n += $2 } END { printf "%d", n }'; }
row() {
  local name=$1 url=$2 f0 e0 b0 f1 e1 b1 out votes vps p50 p99 fr0
  shift 2
  f0=$(cpu $full); e0=$(cpu $edge); b0=$(cpu $bare); fr0=$(frames)
  out=$("$tmp/tally" load --url "$url" --poll p --rate "$rate" --duration "$dur" --connections 400 "$@" --json 2>/dev/null)
  f1=$(cpu $full); e1=$(cpu $edge); b1=$(cpu $bare); row_frames=$(($(frames) - fr0))
  read -r votes vps p50 p99 < <(echo "$out" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["votes"], r["votes_per_sec"], r["p50_ms"], r["p99_ms"])')
  row_votes=$votes row_edge_ticks=$((e1 - e0))
  read -r row_full row_edge row_bare < <(awk -v v="$votes" -v f=$((f1 - f0)) -v e=$((e1 - e0)) -v b=$((b1 - b0)) \
    'BEGIN { printf "%.1f %.1f %.1f\n", f * 10000 / v, e * 10000 / v, b * 10000 / v }')
  awk -v n="$name" -v r="$vps" -v f="$row_full" -v e="$row_edge" -v b="$row_bare" -v p50="$p50" -v p99="$p99" \
    'BEGIN { printf "| %s | %.0f | %s | %s | %s | %s | %s |\n", n, r, f, e, b, p50, p99 }'
}
# ratio TEXT A B [NOTE]: "TEXT = A/B× NOTE".
ratio() { awk -v t="$1" -v a="$2" -v b="$3" -v note="${4:-}" 'BEGIN { if (b > 0) printf "%s = %.2f×%s\n", t, a / b, note; else printf "%s: no CPU measured for the floor\n", t }'; }
echo "| load at $rate/s for $dur | votes/s acked | full node CPU µs/vote | edge CPU µs/vote | bare CPU µs/request | p50 ms | p99 ms |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
row "direct single-vote HTTP to the full node" http://127.0.0.1:18281
row "single-vote HTTP through the edge (relayed)" http://127.0.0.1:18291
edge_http=$row_edge
row "socket votes to the full node" http://127.0.0.1:18281 --socket --connections 1000
row "socket votes through the edge (relayed)" http://127.0.0.1:18291 --socket --connections 1000
edge_socket=$row_edge socket_frames=$row_frames socket_votes=$row_votes socket_ticks=$row_edge_ticks
row "bare decode + ack server" http://127.0.0.1:18299
bare_http=$row_bare
row "bare socket reader (decode + ack)" http://127.0.0.1:18299 --socket --connections 1000
bare_socket=$row_bare
low=${LOW_RATE:-2000}
rate=$low row "single-vote HTTP through the edge at $low/s (the cores not saturated)" http://127.0.0.1:18291
echo
ratio "edge CPU per socket vote / bare socket reader" "$edge_socket" "$bare_socket" " (target: 1.5× at most)"
ratio "edge CPU per socket vote / edge CPU per single-vote HTTP vote" "$edge_socket" "$edge_http"
ratio "edge CPU per HTTP vote / bare HTTP server per request" "$edge_http" "$bare_http"
echo "edge: $(emetric tally_relay_batches_total) relay messages for $(emetric tally_relay_requests_total) requests so far"

# Memory per viewer at the edge: a swarm of viewers on its live stream;
# and its CPU per frame, to take the frames its voting sockets received
# out of the socket votes' figure (those sockets are viewers too: every
# 250 ms tick sends each a frame; the bare reader sends none).
"$tmp/tally" watch --url http://127.0.0.1:18291 --poll p --swarm "${VIEWERS:-3000}" --ramp 6s --duration 5s --server-pid "$edge" --json 2>/dev/null > "$tmp/swarm.json"
python3 -c 'import json,sys; r=json.load(sys.stdin); print("edge with %d viewers: %.1f KB RSS per viewer, %.1f CPU µs per frame, %d frames missed" % (r["connected"], r["rss_per_viewer_kb"], r["cpu_per_frame_us"], r["missed"]))' < "$tmp/swarm.json"
per_frame=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["cpu_per_frame_us"])' < "$tmp/swarm.json")
net=$(awk -v t="$socket_ticks" -v fr="$socket_frames" -v pf="$per_frame" -v v="$socket_votes" 'BEGIN { printf "%.1f", (t * 10000 - fr * pf) / v }')
echo "socket votes through the edge: $socket_frames frames to their sockets while they voted; net of those (at $per_frame µs each) $net CPU µs per vote"
ratio "edge CPU per socket vote, net of its sockets' frames / bare socket reader" "$net" "$bare_socket" " (target: 1.5× at most)"
ratio "edge CPU per socket vote, net of its sockets' frames / edge CPU per single-vote HTTP vote" "$net" "$edge_http" " (target: 0.4× at most)"

# The full node fed relay batches as fast as it answers them.
s0=$(fmetric tally_ledger_batch_records_sum); c0=$(fmetric tally_ledger_batch_records_count); f0=$(cpu $full)
out=$("$tmp/relayload" --nats nats://127.0.0.1:18282 --key-file "$tmp/key" --poll p --duration "$dur" --batch "${BATCH:-256}" --inflight "${INFLIGHT:-16}")
f1=$(cpu $full); s1=$(fmetric tally_ledger_batch_records_sum); c1=$(fmetric tally_ledger_batch_records_count)
echo "relayload: $out"
acc=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["accepted"])')
awk -v a="$acc" -v f=$((f1 - f0)) -v s="$s1" -v s0="$s0" -v c="$c1" -v c0="$c0" \
  'BEGIN { printf "full node fed relay batches: %.1f CPU µs per vote, %.0f records per fsync\n", f * 10000 / a, (s - s0) / (c - c0) }'

# The ack through the edge while one of the region's two full nodes is
# killed with SIGKILL: a second full node joins, votes flow through the
# edge at $low/s, and the first full node dies 3 s in. Every answer is
# counted, 503s included (the edge's resend to the other full node is
# the latency tail).
"$tmp/node" --data-dir "$tmp/full2" --http-addr 127.0.0.1:18301 --nats-addr 127.0.0.1:18302 --gossip-addr 127.0.0.1:18303 \
  --nats-cluster-addr 127.0.0.1:18304 --nats-leaf-addr 127.0.0.1:18305 --join 127.0.0.1:18283 --region eu-west --node-name full2 "${common[@]}" > "$tmp/full2.log" 2>&1 &
pids+=($!)
until curl -sf http://127.0.0.1:18301/readyz >/dev/null && curl -sf http://127.0.0.1:18301/v1/polls/p >/dev/null; do sleep 0.2; done
until curl -sf http://127.0.0.1:18291/v1/cluster | python3 -c 'import json,sys; m=json.load(sys.stdin)["members"]; sys.exit(0 if sum(1 for x in m if x.get("role")=="full" and x.get("status","alive")=="alive")==2 else 1)' 2>/dev/null; do sleep 0.2; done
"$tmp/tally" load --url http://127.0.0.1:18291 --poll p --rate "$low" --duration 10s --connections 400 --json > "$tmp/kill.json" 2>/dev/null &
load=$!
sleep 3
kill -9 $full
wait $load
python3 - "$tmp/kill.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("through the edge at %.0f requests/s, a full node killed 3 s in: %d votes acknowledged, codes %s, p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms, max %.1f ms"
      % (r["requests_per_sec"], r["votes"], r["codes"], r["p50_ms"], r["p99_ms"], r["p999_ms"], r["max_ms"]))
PY
