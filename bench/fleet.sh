#!/usr/bin/env bash
# The fleet model checked against real processes (issue 30): three regions
# of one full node and six edges each — 21 node processes on this machine,
# small data dirs — with modest load: viewers on every edge and votes on
# live sockets at every edge. It measures each process's CPU and RSS, the
# relay's NATS bytes, gossip bytes, leaf connections, the route mesh,
# convergence and certification, and prints them beside what
# `tally fleet plan` predicts for the same load from bench/fleet/figures.json
# (the model's per-process formulas applied to this load, 2-core machines).
# Loopback: a sender's write also runs the receiver's TCP path.
#
#   ./bench/fleet.sh      (VIEWERS=200 per edge, RATE=100 votes/s per edge, DURATION=20s)
set -euo pipefail
cd "$(dirname "$0")/.."
viewers=${VIEWERS:-200}
rate=${RATE:-100}
dur=${DURATION:-20s}
edges=6
. bench/lib.sh # $tmp, $pids and their cleanup, $tmp/node, $tmp/tally
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$1/status"; }
regions=(eu-west us-east ap-south)
head -c 32 /dev/urandom | base64 > "$tmp/key"
head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$tmp/admin-token"
# --ack-copies 1: these figures are of one full node; bench/copies.sh
# measures the second copy (issue 48).
common=(--ack-copies 1 --rate-ip 0 --rate-voter 0 --trust-floor 0 --pow-bits 0 --demo=false --gossip-key-file "$tmp/key" --gossip-profile local
  --max-viewers-per-ip 100000)
# Ports: full node of region i at 18600+20i (HTTP), +1 NATS, +2 gossip,
# +3 routes, +4 leaf, +5 gateway; edge j of region i HTTP 18700+10i+j,
# gossip 18800+10i+j, NATS client 18900+10i+j.
seeds=127.0.0.1:18602,127.0.0.1:18622,127.0.0.1:18642
declare -A pid
for i in 0 1 2; do
  b=$((18600 + 20 * i)) r=${regions[$i]}
  "$tmp/node" --region "$r" --node-name "$r-full" --data-dir "$tmp/$r" --http-addr "127.0.0.1:$b" --nats-addr "127.0.0.1:$((b + 1))" \
    --gossip-addr "127.0.0.1:$((b + 2))" --nats-cluster-addr "127.0.0.1:$((b + 3))" --nats-leaf-addr "127.0.0.1:$((b + 4))" \
    --nats-gateway-addr "127.0.0.1:$((b + 5))" --join "$seeds" --admin-token-file "$tmp/admin-token" "${common[@]}" > "$tmp/$r.log" 2>&1 &
  pid[$r-full]=$!; pids+=($!)
done
for i in 0 1 2; do
  until curl -sf "http://127.0.0.1:$((18600 + 20 * i))/readyz" >/dev/null; do kill -0 "${pid[${regions[$i]}-full]}" || { cat "$tmp/${regions[$i]}.log"; exit 1; }; sleep 0.2; done
done
for i in 0 1 2; do
  for ((j = 0; j < edges; j++)); do
    r=${regions[$i]} n=${regions[$i]}-edge-$j
    "$tmp/node" --role edge --region "$r" --node-name "$n" --data-dir "$tmp/$n" --http-addr "127.0.0.1:$((18700 + 10 * i + j))" \
      --gossip-addr "127.0.0.1:$((18800 + 10 * i + j))" --nats-addr "127.0.0.1:$((18900 + 10 * i + j))" --join "$seeds" "${common[@]}" > "$tmp/$n.log" 2>&1 &
    pid[$n]=$!; pids+=($!)
  done
done
for i in 0 1 2; do
  for ((j = 0; j < edges; j++)); do
    until curl -sf "http://127.0.0.1:$((18700 + 10 * i + j))/readyz" >/dev/null; do kill -0 "${pid[${regions[$i]}-edge-$j]}" || { cat "$tmp/${regions[$i]}-edge-$j.log"; exit 1; }; sleep 0.2; done
  done
done
echo "21 processes ready: $(for p in "${pid[@]}"; do ls /proc/$p/fd | wc -l; done | awk '{s += $1} END {print s}') open files among them"
admin="Authorization: Bearer $(cat "$tmp/admin-token")"
curl -sf -X POST http://127.0.0.1:18600/v1/polls -H 'Content-Type: application/json' -H "$admin" \
  -d '{"id":"p","question":"Fleet?","options":[{"id":"red","label":"Red"},{"id":"green","label":"Green"},{"id":"blue","label":"Blue"},{"id":"gold","label":"Gold"}],"duration_s":300,"grace_s":2}' >/dev/null
for i in 0 1 2; do for ((j = 0; j < edges; j++)); do
  until curl -sf "http://127.0.0.1:$((18700 + 10 * i + j))/v1/polls/p" >/dev/null; do sleep 0.2; done
done; done
cluster=$(curl -sf http://127.0.0.1:18600/v1/cluster)
echo "$cluster" | python3 -c '
import json, sys
c = json.load(sys.stdin)
m = c.get("members", [])
print("members %d (full %d, edge %d); NATS at eu-west-full: %s" % (len(m), sum(1 for x in m if x.get("role") == "full"), sum(1 for x in m if x.get("role") == "edge"),
      {k: v for k, v in c.get("nats", {}).items() if k in ("routes", "gateways", "leaf_nodes", "connected")}))'

if [ -n "${HOLD:-}" ]; then echo "holding the cluster (HOLD set): kill $$ to stop it"; while :; do sleep 1; done; fi
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m { s += $2 } END { print s + 0 }'; }
gossip_out() { curl -s "http://127.0.0.1:$1/metrics" | awk '/^tally_gossip_bytes_total\{.*direction="out"/ { s += $2 } END { print s + 0 }'; }
declare -A c0 c1
for n in "${!pid[@]}"; do c0[$n]=$(cpu "${pid[$n]}"); done
g0=$(for i in 0 1 2; do gossip_out $((18600 + 20 * i)); done | awk '{s += $1} END {print s}')
rb0=$(for i in 0 1 2; do for ((j = 0; j < edges; j++)); do metric $((18700 + 10 * i + j)) 'tally_relay_bytes_total{direction="out"}'; metric $((18700 + 10 * i + j)) 'tally_relay_bytes_total{direction="in"}'; done; done | awk '{s += $1} END {print s}')
start=$(date +%s.%N)
# Viewers and voters at every edge: one swarm (its votes off) and one load
# generator (socket votes) per edge, each bounded by --duration.
for i in 0 1 2; do for ((j = 0; j < edges; j++)); do
  e=$((18700 + 10 * i + j)) k=$((6 * i + j))
  "$tmp/tally" watch --url "http://127.0.0.1:$e" --poll p --swarm "$viewers" --ramp 5s --duration "$dur" --votes-per-sec 0 \
    --source-offset $((k * (viewers / 100 + 1))) --json > "$tmp/watch-$k.json" 2>/dev/null &
  "$tmp/tally" load --url "http://127.0.0.1:$e" --poll p --rate "$rate" --duration "$dur" --socket --connections 20 --json > "$tmp/load-$k.json" 2>/dev/null &
done; done
while pgrep -f "$tmp/tally" >/dev/null; do sleep 0.5; done
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { print e - s }')
for n in "${!pid[@]}"; do c1[$n]=$(cpu "${pid[$n]}"); done
g1=$(for i in 0 1 2; do gossip_out $((18600 + 20 * i)); done | awk '{s += $1} END {print s}')
rb1=$(for i in 0 1 2; do for ((j = 0; j < edges; j++)); do metric $((18700 + 10 * i + j)) 'tally_relay_bytes_total{direction="out"}'; metric $((18700 + 10 * i + j)) 'tally_relay_bytes_total{direction="in"}'; done; done | awk '{s += $1} END {print s}')

# Converged: every region's live total the same, and unchanged over
# half a second (votes answered after their client gave up count too, so
# the acknowledged sum is a floor, not the total).
acked=$(python3 -c 'import glob,json,sys; print(sum(json.load(open(f))["codes"].get("200", 0) for f in glob.glob(sys.argv[1] + "/load-*.json")))' "$tmp")
t0=$(date +%s.%N)
totals() { for i in 0 1 2; do curl -sf "http://127.0.0.1:$((18600 + 20 * i))/v1/polls/p" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])'; done | sort -u | tr '\n' ' '; }
prev=""
while :; do
  now=$(totals)
  [ "$(echo $now | wc -w)" = 1 ] && [ "$now" = "$prev" ] && break
  prev=$now; sleep 0.5
done
live=$now
conv=$(awk -v s="$t0" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s - 0.5 }')
# Certified: close now; time from close + grace (2 s) to every region's certificate.
curl -sf -X POST http://127.0.0.1:18600/v1/polls/p/close -H "$admin" >/dev/null
tc=$(date +%s.%N)
for i in 0 1 2; do
  until curl -sf "http://127.0.0.1:$((18600 + 20 * i))/v1/polls/p/result" | grep -q '"status":"reconciled"'; do sleep 0.05; done
done
cert=$(awk -v s="$tc" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s - 2 }')
ctotal=$(curl -sf http://127.0.0.1:18600/v1/polls/p/result | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')

python3 - "$tmp" "$elapsed" "$acked" "$conv" "$cert" "$ctotal" "$viewers" "$rate" "$((g1 - g0))" "$(awk -v a="$rb1" -v b="$rb0" 'BEGIN{print a-b}')" <<'PY' "$(for n in "${!pid[@]}"; do echo "$n:$(( ${c1[$n]} - ${c0[$n]} )):$(rss "${pid[$n]}")"; done)"
import glob, json, sys
tmp, elapsed, acked, conv, cert, ctotal, viewers, rate, gossip, relaybytes = sys.argv[1:11]
procs = [l.split(":") for l in sys.argv[11].split()]
elapsed = float(elapsed)
watch = [json.load(open(f)) for f in glob.glob(tmp + "/watch-*.json")]
load = [json.load(open(f)) for f in glob.glob(tmp + "/load-*.json")]
viewers, rate = int(viewers), float(rate)
frames = sum(w.get("frames", 0) for w in watch)
missed = sum(w.get("missed", 0) for w in watch)
connected = sum(w.get("connected", 0) for w in watch)
votes_edge = float(sum(l["votes"] for l in load)) / 18 / elapsed
fps = frames / max(connected, 1) / elapsed
# The model (tally fleet plan with the counts given: fleet.At, the
# formulas of docs/capacity.md) for this load, per process.
import subprocess
tick_ms = max(50, min(2000, 1000.0 / max(fps, 0.5)))
# (exit 1: these counts past the model's machines; its figures all the same)
plan = json.loads(subprocess.run([tmp + "/tally", "fleet", "plan", "--json", "--full", "1", "--edges", "6", "--regions", "3",
    "--votes", str(max(int(acked), 1)), "--window", "%.0fs" % max(elapsed, 1), "--burst", "%.1f" % (max(votes_edge * 18, int(acked) / elapsed) + 0.1),
    "--viewers", str(max(connected, 1)), "--tick", "%dms" % tick_ms, "--cores", "2", "--memory", "24", "--busy", "1", "--files", "20000"],
    capture_output=True, text=True).stdout)
edge_cpu, edge_rss = plan["edge"]["cores"], plan["edge"]["rss_bytes"]
full_cpu, full_rss = plan["full"]["cores"], plan["full"]["rss_bytes"]
def row(name, measured, predicted, unit, fmt="%.3f"):
    dev = (measured - predicted) / predicted * 100 if predicted else float("nan")
    print("| %s | %s %s | %s %s | %+.0f%% |" % (name, fmt % measured, unit, fmt % predicted, unit, dev))
edges = [p for p in procs if "-edge-" in p[0]]
fulls = [p for p in procs if "-edge-" not in p[0]]
m_edge_cpu = sum(int(p[1]) for p in edges) / 100 / elapsed / len(edges)
m_full_cpu = sum(int(p[1]) for p in fulls) / 100 / elapsed / len(fulls)
m_edge_rss = sum(int(p[2]) for p in edges) / len(edges)
m_full_rss = sum(int(p[2]) for p in fulls) / len(fulls)
print("load: %d viewers per edge (%d connected of %d, %d frames missed, %.2f frames/s each), %.0f votes/s per edge on sockets, %.0f s; %s votes acknowledged, certified total %s"
      % (viewers, connected, viewers * 18, missed, fps, votes_edge, elapsed, acked, ctotal))
print()
print("| figure (mean per process) | measured | model | off by |")
print("| --- | ---: | ---: | ---: |")
row("edge CPU", m_edge_cpu, edge_cpu, "cores")
row("edge RSS", m_edge_rss / 1e6, edge_rss / 1e6, "MB", "%.0f")
row("full node CPU", m_full_cpu, full_cpu, "cores")
row("full node RSS", m_full_rss / 1e6, full_rss / 1e6, "MB", "%.0f")
row("relay bytes per edge", float(relaybytes) / 18 / elapsed / 1e3, plan["relay_link_bytes_per_s"] / 1e3, "KB/s", "%.1f")
row("gossip bytes out per full node", float(gossip) / 3 / elapsed / 1e3, plan["gossip_bytes_per_s"] / 1e3, "KB/s", "%.1f")
print()
print("converged (every region's live total the same) within %s s of the load's end; %s votes acknowledged (a floor: answers that came after a client gave up count too); certified at every region %s s after close + grace" % (conv, acked, cert))
codes = {}
for l in load:
    for k, v in l["codes"].items():
        codes[k] = codes.get(k, 0) + v
print("vote answers by status (0: none before the client's timeout): %s; ack p50 %.0f ms, p99 %.0f ms (mean over edges)" % (codes, sum(l["p50_ms"] for l in load) / len(load), sum(l["p99_ms"] for l in load) / len(load)))
print("per process (name: CPU ticks over the run, RSS bytes): " + ", ".join("%s %s %s" % tuple(p) for p in sorted(procs)))
PY
