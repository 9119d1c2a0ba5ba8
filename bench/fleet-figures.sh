#!/usr/bin/env bash
# The per-process figures the fleet model reads (tally fleet plan,
# docs/capacity.md), measured on this machine and written to
# bench/fleet/figures.json and its copy fleet/figures.json, the one built
# into tally (or to $OUT alone). One full node and one edge of it on
# loopback, about three minutes:
#   - idle CPU and RSS of each;
#   - socket votes through the edge at two rates: the full node's CPU per
#     relay message and per relayed vote (two equations, two unknowns), the
#     edge's CPU and the bytes on NATS the same way (per message, per vote), RSS per vote at the full
#     node (its voter state and its copy of the chain), gossip bytes per
#     vote (ballots and counts published), the ack p50/p99;
#   - viewers on the edge: RSS per viewer, CPU per frame written;
#   - gossip bytes a full node sends per second with 1 and with 11 polls;
#   - what each member of the cluster costs the full node and the edge at
#     rest (CPU, RSS, the full node's gossip), from 8 more edges joined;
#   - the certifier's incremental merge (ledger.Merge): records a second
#     fed to it, and records a second its result at close covers.
# Loopback: a sender's write also runs the receiver's TCP path, so CPU per
# vote and per frame on each side is higher than over a real NIC.
#
#   ./bench/fleet-figures.sh      (LOW=1500 HIGH=5000 DURATION=8s VIEWERS=2000)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/fleet/figures.json}
low=${LOW:-1500}
high=${HIGH:-5000}
dur=${DURATION:-8s}
viewers=${VIEWERS:-2000}
. bench/lib.sh # $tmp, $pids and their cleanup, $tmp/node, $tmp/tally
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # clock ticks, 100 a second
rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$1/status"; }
head -c 32 /dev/urandom | base64 > "$tmp/key"
# --ack-copies 1: these figures are of one full node; bench/copies.sh
# measures the second copy (issue 48).
common=(--ack-copies 1 --rate-ip 0 --rate-voter 0 --trust-floor 0 --pow-bits 0 --demo=false --gossip-key-file "$tmp/key" --gossip-profile local
  --nats-gateway-addr '' --max-viewers-per-ip 100000)
"$tmp/node" --data-dir "$tmp/full" --http-addr 127.0.0.1:18481 --nats-addr 127.0.0.1:18482 --gossip-addr 127.0.0.1:18483 \
  --nats-cluster-addr 127.0.0.1:18484 --nats-leaf-addr 127.0.0.1:18485 --region eu-west --node-name full "${common[@]}" > "$tmp/full.log" 2>&1 &
full=$!; pids+=($full)
until curl -sf http://127.0.0.1:18481/readyz >/dev/null; do kill -0 $full || { cat "$tmp/full.log"; exit 1; }; sleep 0.2; done
"$tmp/node" --role edge --data-dir "$tmp/edge" --http-addr 127.0.0.1:18491 --nats-addr 127.0.0.1:18492 --gossip-addr 127.0.0.1:18493 \
  --join 127.0.0.1:18483 --region eu-west --node-name edge "${common[@]}" > "$tmp/edge.log" 2>&1 &
edge=$!; pids+=($edge)
until curl -sf http://127.0.0.1:18491/readyz >/dev/null; do kill -0 $edge || { cat "$tmp/edge.log"; exit 1; }; sleep 0.2; done
admin="Authorization: Bearer $(cat "$tmp/full/admin-token")"
mkpoll() {
  curl -sf -X POST http://127.0.0.1:18481/v1/polls -H 'Content-Type: application/json' -H "$admin" \
    -d '{"id":"'"$1"'","question":"Fleet?","options":[{"id":"red","label":"Red"},{"id":"green","label":"Green"},{"id":"blue","label":"Blue"},{"id":"gold","label":"Gold"}],"duration_s":3600}' >/dev/null
}
mkpoll p
until curl -sf http://127.0.0.1:18491/v1/polls/p >/dev/null; do sleep 0.2; done
fmetric() { curl -s http://127.0.0.1:18481/metrics | awk -v m="$1" '$1 == m { print $2 }'; }
emetric() { curl -s http://127.0.0.1:18491/metrics | awk -v m="$1" '$1 == m { print $2 }'; }
gossip_out() { curl -s http://127.0.0.1:18481/metrics | awk '/^tally_gossip_bytes_total\{.*direction="out"/ { s += $2 } END { print s + 0 }'; }
sleep 3 # past the start's own work

# Idle, and gossip with one poll.
f0=$(cpu $full); e0=$(cpu $edge); g0=$(gossip_out); sleep 10
f1=$(cpu $full); e1=$(cpu $edge); g1=$(gossip_out)
idle_full=$(awk -v d=$((f1 - f0)) 'BEGIN { print d / 1000 }') # cores: ticks/100 over 10 s
idle_edge=$(awk -v d=$((e1 - e0)) 'BEGIN { print d / 1000 }')
gossip1=$(awk -v d="$(awk -v a="$g1" -v b="$g0" 'BEGIN { print a - b }')" 'BEGIN { print d / 10 }')
rss_full=$(rss $full); rss_edge=$(rss $edge)

# Viewers on the edge first (before the vote runs grow its heap): RSS per
# viewer over the whole swarm, and CPU per frame over 6 s of the steady
# state, after every viewer connected (a change every tick: the swarm's
# 40 votes a second).
"$tmp/tally" watch --url http://127.0.0.1:18491 --poll p --swarm "$viewers" --ramp 4s --duration 12s --server-pid "$edge" --json > "$tmp/watch.json" 2>/dev/null &
watch=$!
sleep 7
e0=$(cpu $edge); s0=$(emetric 'tally_frames_sent_total{transport="websocket"}')
sleep 6
e1=$(cpu $edge); s1=$(emetric 'tally_frames_sent_total{transport="websocket"}')
wait $watch
read -r connected rsskb missed < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["connected"], r["rss_per_viewer_kb"], r["missed"])' "$tmp/watch.json")

# rate R: socket votes through the edge; prints the deltas.
run() {
  local f0 e0 b0 q0 o0 i0 r0 f1 e1 b1 q1 o1 i1 r1 res g0 g1
  f0=$(cpu $full); e0=$(cpu $edge); r0=$(rss $full); g0=$(gossip_out)
  b0=$(emetric tally_relay_batches_total); q0=$(emetric tally_relay_requests_total)
  o0=$(emetric 'tally_relay_bytes_total{direction="out"}'); i0=$(emetric 'tally_relay_bytes_total{direction="in"}')
  res=$("$tmp/tally" load --url http://127.0.0.1:18491 --poll p --rate "$1" --duration "$dur" --socket --connections 1000 --json 2>/dev/null)
  f1=$(cpu $full); e1=$(cpu $edge); r1=$(rss $full); g1=$(gossip_out)
  b1=$(emetric tally_relay_batches_total); q1=$(emetric tally_relay_requests_total)
  o1=$(emetric 'tally_relay_bytes_total{direction="out"}'); i1=$(emetric 'tally_relay_bytes_total{direction="in"}')
  echo "$res" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["votes"], r["p50_ms"], r["p99_ms"], end=" ")'
  awk -v a="$b0" -v b="$b1" -v c="$q0" -v d="$q1" -v e="$o0" -v f="$o1" -v g="$i0" -v h="$i1" \
    'BEGIN { printf "%d %d %d ", b - a, d - c, (f - e) + (h - g) }'
  echo "$((f1 - f0)) $((e1 - e0)) $((r1 - r0)) $(awk -v a="$g1" -v b="$g0" 'BEGIN { print a - b }')"
}
read -r lv lp50 lp99 lm lq lbytes lf le lr lg < <(run "$low")
read -r hv hp50 hp99 hm hq hbytes hf he hr hg < <(run "$high")

# Gossip with eleven polls.
for i in $(seq 1 10); do mkpoll "g$i"; done
sleep 3
g0=$(gossip_out); sleep 10; g1=$(gossip_out)
gossip11=$(awk -v a="$g1" -v b="$g0" 'BEGIN { print (a - b) / 10 }')

# What each member of the cluster costs the others at rest: the full node's
# and the edge's CPU, RSS and the full node's gossip over 10 s, then again
# with $members more edges joined (memberlist probes and push/pull, their
# state, a NATS leaf connection each), the difference per member.
members=${MEMBERS:-8}
at_rest() { # prints: full CPU ticks, edge CPU ticks, full RSS, edge RSS, gossip bytes, over 10 s
  local f0 e0 g0
  f0=$(cpu $full); e0=$(cpu $edge); g0=$(gossip_out); sleep 10
  echo "$(($(cpu $full) - f0)) $(($(cpu $edge) - e0)) $(rss $full) $(rss $edge) $(awk -v a="$(gossip_out)" -v b="$g0" 'BEGIN { print a - b }')"
}
read -r mf0 me0 mrf0 mre0 mg0 < <(at_rest)
for ((j = 0; j < members; j++)); do
  "$tmp/node" --role edge --data-dir "$tmp/member-$j" --http-addr "127.0.0.1:$((18500 + j))" --nats-addr "127.0.0.1:$((18520 + j))" \
    --gossip-addr "127.0.0.1:$((18540 + j))" --join 127.0.0.1:18483 --region eu-west --node-name "member-$j" "${common[@]}" > "$tmp/member-$j.log" 2>&1 &
  pids+=($!)
done
for ((j = 0; j < members; j++)); do
  until curl -sf "http://127.0.0.1:$((18500 + j))/readyz" >/dev/null; do sleep 0.2; done
done
sleep 3 # past the joins' own work
read -r mf1 me1 mrf1 mre1 mg1 < <(at_rest)

# The merge: fed while the poll runs (and the tail at close), its result at close.
mergebench=$(go test ./ledger -run '^$' -bench '^BenchmarkMerge$' -benchtime 2x 2>/dev/null)
merge_add=$(echo "$mergebench" | awk '/^BenchmarkMerge\/add/ { for (i = 1; i <= NF; i++) if ($(i+1) == "records/s") print $i }')
merge_result=$(echo "$mergebench" | awk '/^BenchmarkMerge\/result/ { for (i = 1; i <= NF; i++) if ($(i+1) == "records/s") print $i }')

mkdir -p "$(dirname "$out")"
python3 - "$out" <<PY
import json, sys, datetime, os
# Two rates, two unknowns: full CPU µs = messages * per_message + votes * per_vote.
lm, lq, lf = $lm, $lq, $lf * 10000.0
hm, hq, hf = $hm, $hq, $hf * 10000.0
det = lm * hq - hm * lq
per_msg = (lf * hq - hf * lq) / det if det else 0.0
per_vote = (lm * hf - hm * lf) / det if det else (hf / hq)
def solve(l, h):
    """The per-message and per-vote parts of a cost measured at the two
    rates (l, h: the cost over each run), each at least 0; without a
    second equation, all of it per vote."""
    m = (l * hq - h * lq) / det if det else 0.0
    v = (lm * h - hm * l) / det if det else (l + h) / (lq + hq)
    if m < 0 or v <= 0:
        return 0.0, (l + h) / (lq + hq)
    return m, v
edge_msg, edge_vote = solve($le * 10000.0, $he * 10000.0)
# Gossip while votes flow: a rate of its own (the deltas' publications,
# ten a second, whatever they carry) and bytes per vote; two runs of the
# same length, two equations.
secs = float("$dur".rstrip("s"))
g_vote = ($hg - $lg) / ($hq - $lq) if $hq != $lq else ($lg + $hg) / max($lq + $hq, 1)
g_rate = ($lg - g_vote * $lq) / secs - $gossip1
if g_vote <= 0 or g_rate < 0:
    g_vote, g_rate = ($lg + $hg) / max($lq + $hq, 1), 0.0
bytes_msg, bytes_vote = solve(float($lbytes), float($hbytes))
frames = $s1 - $s0
fig = {
    "measured": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
    "machine": "%d cores, loopback (a sender's write also runs the receiver's TCP path)" % os.cpu_count(),
    "command": "./bench/fleet-figures.sh",
    "full_idle_cores": $idle_full,
    "edge_idle_cores": $idle_edge,
    "full_base_rss_bytes": $rss_full,
    "edge_base_rss_bytes": $rss_edge,
    "full_us_per_relay_message": round(max(per_msg, 0.0), 1),
    "full_us_per_relayed_vote": round(per_vote, 1),
    "edge_us_per_relay_message": round(edge_msg, 1),
    "edge_us_per_socket_vote": round(edge_vote, 1),
    "relay_bytes_per_message": round(bytes_msg, 1),
    "relay_bytes_per_vote": round(bytes_vote, 1),
    "votes_per_relay_message": {"at": [$low, $high], "measured": [round($lq / max($lm, 1), 1), round($hq / max($hm, 1), 1)]},
    "full_rss_bytes_per_vote": round(max($lr + $hr, 0) / max($lv + $hv, 1), 1),
    "ack_ms": {"rate": $low, "p50": $lp50, "p99": $lp99, "full_cores_busy": round($lf / 100.0 / float("$dur".rstrip("s")), 2)},
    "ack_ms_high": {"rate": $high, "p50": $hp50, "p99": $hp99, "full_cores_busy": round($hf / 100.0 / float("$dur".rstrip("s")), 2)},
    "edge_rss_bytes_per_viewer": round($rsskb * 1000.0, 0),
    "edge_us_per_frame": round(max($e1 - $e0 - $idle_edge * 600, 0) * 10000.0 / max(frames, 1), 2),
    "gossip_bytes_per_vote": round(g_vote, 1),
    "gossip_bytes_per_s_voting": round(g_rate, 1),
    "viewers_measured": {"connected": $connected, "frames": frames, "missed": $missed},
    "gossip_bytes_per_s_per_full_node": {"polls_1": $gossip1, "polls_11": $gossip11},
    "per_member": {
        "members_added": $members,
        "full_cores": round(max($mf1 - $mf0, 0) / 1000.0 / $members, 5),
        "edge_cores": round(max($me1 - $me0, 0) / 1000.0 / $members, 5),
        "full_rss_bytes": round(max($mrf1 - $mrf0, 0) / $members),
        "edge_rss_bytes": round(max($mre1 - $mre0, 0) / $members),
        "gossip_bytes_per_s": round(max($mg1 - $mg0, 0) / 10.0 / $members, 1),
    },
    "merge_add_records_per_s": float("${merge_add:-0}"),
    "merge_result_records_per_s": float("${merge_result:-0}"),
}
# The second copy's figures come from ./bench/copies.sh (BENCHMARKS.md,
# "Two copies"), entered by hand: kept from the file being replaced.
try:
    old = json.load(open(sys.argv[1]))
    for k in ("copy_us_per_vote", "copy_bytes_per_vote", "copy_ms"):
        if k in old:
            fig[k] = old[k]
except (OSError, ValueError):
    pass
json.dump(fig, open(sys.argv[1], "w"), indent=2)
print(json.dumps(fig, indent=2))
PY
# The copy go:embed builds into tally (fleet.Default): it cannot reach
# bench/ from package fleet.
[[ -n ${OUT:-} ]] || cp bench/fleet/figures.json fleet/figures.json
