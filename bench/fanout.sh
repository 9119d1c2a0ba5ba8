#!/usr/bin/env bash
# Fan-out benchmark for BENCHMARKS.md: node processes on loopback, viewer
# swarms (`tally watch --swarm`) from many 127.0.0.x source addresses, 40
# votes/s so every 250 ms tick carries a change (4 updates/s per viewer);
# then, in the same run, the bare writer under a swarm of the same size:
# the floor the node's fan-out is compared against (issue 61).
#
#   bench/fanout.sh [VIEWERS_PER_NODE] [NODES]     default: 18000 1
#   RAMP=20s DURATION=20s bench/fanout.sh …        the swarms' ramp and measurement
#   FANOUT_CPU=1 bench/fanout.sh …                  the node's --fanout-cpu (default 0)
#
# The table's rows:
#   node I       a node (cmd/node) with VIEWERS_PER_NODE viewers: the
#                product's fan-out. With NODES > 1 the nodes and their
#                swarms run at the same time. Its tick does not stretch
#                (--fanout-cpu 0): stretched by the pacer, which reads the
#                machine's contention (the swarm's and other tenants'),
#                it would send fewer frames than the bare writer, each
#                carrying more of the fixed costs; FANOUT_CPU sets another
#                budget (the node's own default is half the cores).
#   bare writer  bench/barefanout, alone (the nodes are stopped first),
#                with one swarm of VIEWERS_PER_NODE viewers: a minimal Go
#                program holding the same number of sockets that writes
#                the same pre-encoded WebSocket frame (a diff of the poll,
#                about the node's size) to each, every 250 ms, with one
#                plain net.Conn write — and nothing else.
# Every figure is the swarm's: frames each viewer received per second,
# seq gaps (missed), viewers the server dropped, the lag from the frame's
# as_of_ms to its arrival, and, from /proc of the server process, RSS per
# viewer ((RSS connected − RSS before) / viewers) and CPU per delivered
# frame (the server's CPU while measuring / frames the viewers received).
# The last line divides the node's CPU per frame (with NODES > 1 the
# nodes' mean: compare per node — the nodes then share the cores with
# NODES swarms, the bare writer with one, so the ratio is looser) by the
# bare writer's; the target is ≤ 1.5×.
#
# Loopback: a sender's write also runs the receiver's TCP path (the
# kernel delivers into the viewer's socket in the sender's system call),
# so both CPU figures hold receive work that a real network would leave to
# the viewers' machines, and the swarm's reading shares the two cores.
# Both rows pay it alike, which is what makes the ratio the comparison.
# Each server also answers the swarm's 40 votes/s: the node counts them,
# the bare writer answers 204.
#
# A process may hold ~20,000 open files here, so each node serves at most
# ~19k viewers and each swarm process opens at most ~19k: 50,000 viewers
# take three nodes and three swarms (bench/fanout.sh 16667 3).
set -euo pipefail
cd "$(dirname "$0")/.."
per=${1:-18000}
nodes=${2:-1}
ramp=${RAMP:-20s}
duration=${DURATION:-20s}
fanout_cpu=${FANOUT_CPU:-0}
tmp=$(mktemp -d)
pids=()
spids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
go build -o "$tmp/node" ./cmd/node
go build -o "$tmp/tally" ./cmd/tally
go build -o "$tmp/barefanout" ./bench/barefanout

# swarm NAME PORT SERVER_PID SOURCE_OFFSET: a swarm of $per viewers, its
# report in $tmp/NAME.json.
swarm() {
  "$tmp/tally" watch --url "http://127.0.0.1:$2" --poll demo --swarm "$per" --ramp "$ramp" --duration "$duration" \
    --server-pid "$3" --source-offset "$4" --json > "$tmp/$1.json" 2> "$tmp/$1.err"
}
# field NAME KEY: a number from $tmp/NAME.json (0 when absent: the
# report leaves out zero server figures).
field() { local v; v=$(sed -n "s/^ *\"$2\": *\([^,]*\),\{0,1\}$/\1/p" "$tmp/$1.json"); echo "${v:-0}"; }
# row NAME SETUP: the table's row for a swarm's report.
row() {
  if [ ! -s "$tmp/$1.json" ]; then echo "| $2 | swarm failed: $(tail -1 "$tmp/$1.err") |"; return; fi
  printf '| %s | %s/%s | %.2f | %s | %s | %.0f ms | %.0f ms | %.1f KB | %.2f µs |\n' "$2" \
    "$(field "$1" connected)" "$(field "$1" viewers)" "$(field "$1" frames_per_sec)" \
    "$(field "$1" missed)" "$(field "$1" disconnected)" "$(field "$1" lag_p50_ms)" "$(field "$1" lag_p99_ms)" \
    "$(field "$1" rss_per_viewer_kb)" "$(field "$1" cpu_per_frame_us)"
}

# The nodes and their swarms.
for i in $(seq 1 "$nodes"); do
  # Ports other than HTTP are the system's choice, so nodes (of this run
  # or another on the machine) do not collide.
  "$tmp/node" --data-dir "$tmp/data$i" --http-addr "127.0.0.1:$((18180 + i))" --gossip-addr 127.0.0.1:0 --nats-addr 127.0.0.1:0 \
    --nats-cluster-addr '' --nats-gateway-addr '' --nats-leaf-addr '' --rate-ip 0 --rate-voter 0 --trust-floor 0 \
    --fanout-cpu "$fanout_cpu" --max-viewers $((per + 500)) > "$tmp/node$i.log" 2>&1 &
  pids+=($!)
done
for i in $(seq 1 "$nodes"); do
  until curl -sf "http://127.0.0.1:$((18180 + i))/readyz" >/dev/null; do
    kill -0 "${pids[$((i - 1))]}" 2>/dev/null || { cat "$tmp/node$i.log"; exit 1; }
    sleep 0.2
  done
done
for i in $(seq 1 "$nodes"); do
  # Each swarm uses its own range of source addresses (--per-ip viewers each).
  swarm "node$i" $((18180 + i)) "${pids[$((i - 1))]}" $(( (i - 1) * 250 )) &
  spids+=($!)
done
for p in "${spids[@]}"; do wait "$p" || true; done
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
pids=()

# The bare writer, alone, with one swarm of the same size.
bport=$((18180 + nodes + 1))
"$tmp/barefanout" --addr "127.0.0.1:$bport" --poll demo --tick 250ms --max-conns $((per + 500)) 2> "$tmp/bare.log" &
bare=$!; pids+=($bare)
until curl -sf "http://127.0.0.1:$bport/readyz" >/dev/null; do
  kill -0 "$bare" 2>/dev/null || { cat "$tmp/bare.log"; exit 1; }
  sleep 0.2
done
swarm bare "$bport" "$bare" 0 || true
kill "$bare" 2>/dev/null || true; wait "$bare" 2>/dev/null || true

echo "fan-out: $per viewers per node, $nodes node(s); ramp $ramp, measured $duration; 40 votes/s, 250 ms tick, node --fanout-cpu $fanout_cpu"
echo "| setup | connected | frames/s per viewer (of 4) | missed | dropped | lag p50 | lag p99 | RSS per viewer | CPU per frame |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for i in $(seq 1 "$nodes"); do row "node$i" "node $i"; done
row bare "bare writer"
grep -h '^frame:' "$tmp/bare.log" | sed 's/^frame:/bare writer frame (seq, as_of_ms patched each tick):/'
node_cpu=$(for i in $(seq 1 "$nodes"); do [ -s "$tmp/node$i.json" ] && field "node$i" cpu_per_frame_us; done | awk '$1 > 0 { s += $1; n++ } END { if (n) printf "%.4f", s / n }')
bare_cpu=0; [ -s "$tmp/bare.json" ] && bare_cpu=$(field bare cpu_per_frame_us)
if [ -n "$node_cpu" ] && awk -v b="$bare_cpu" 'BEGIN { exit !(b > 0) }'; then
  of=""; [ "$nodes" -gt 1 ] && of=" (mean of $nodes nodes)"
  awk -v n="$node_cpu" -v b="$bare_cpu" -v of="$of" 'BEGIN { printf "node CPU per frame%s / bare writer CPU per frame = %.2f× (%.2f / %.2f µs; target ≤ 1.5×)\n", of, n / b, n, b }'
else
  echo "node CPU per frame / bare writer CPU per frame: not measured (see the swarms' errors above)"
fi
