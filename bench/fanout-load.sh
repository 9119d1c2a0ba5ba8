#!/usr/bin/env bash
# The fan-out that bends (issue 30's first goal), measured on one node:
# votes at $RATE a second with no viewers, then the same votes with
# $VIEWERS viewers connected. It prints the ack p50/p99 of both, the
# viewers' frames missed, frame lag and freshness (the tick the frames
# carry plus the frame lag: a vote acknowledged just after a tick is on
# screen at most that much later), and the hub's tick second by second.
# The node runs with its defaults (--tick 250ms, --max-tick 1s,
# --fanout-cpu half the cores). Loopback: the viewers and the voters run
# on the same two cores as the node, and a sender's write also runs the
# receiver's TCP path.
#
#   ./bench/fanout-load.sh      (VIEWERS=15000 RATE=5000 DURATION=15s, about 2 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
viewers=${VIEWERS:-15000}
rate=${RATE:-5000}
dur=${DURATION:-15s}
. bench/lib.sh
start_node 18581
curl -sf -X POST "$url/v1/polls" -H 'Content-Type: application/json' -H "$auth" \
  -d '{"id":"p","question":"Bend?","options":[{"id":"red","label":"Red"},{"id":"green","label":"Green"},{"id":"blue","label":"Blue"},{"id":"gold","label":"Gold"}],"duration_s":3600}' >/dev/null
load() { "$tmp/tally" load --url "$url" --poll p --rate "$rate" --duration "$dur" --connections 400 --json 2>/dev/null; }
summary() { python3 -c 'import json,sys; r=json.load(sys.stdin); print("%d votes, codes %s, ack p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (r["votes"], r["codes"], r["p50_ms"], r["p99_ms"], r["max_ms"]))'; }

echo "no viewers, $rate votes/s for $dur: $(load | summary)"

# The viewers: connected over 30 s, then measured while the votes run
# (the swarm's own votes off).
secs=${dur%s}
"$tmp/tally" watch --url "$url" --poll p --swarm "$viewers" --ramp 30s --duration "$((secs + 10))s" --votes-per-sec 0 \
  --server-pid "$node" --json > "$tmp/watch.json" 2> "$tmp/watch.log" &
watch=$!
sleep 34
ticks=()
( for _ in $(seq 1 $((secs + 6))); do metric tally_fanout_interval_seconds; sleep 1; done ) > "$tmp/ticks" &
sampler=$!
with=$(load | summary)
wait $sampler
wait $watch
echo "$viewers viewers, $rate votes/s for $dur: $with"
python3 - "$tmp/watch.json" "$tmp/ticks" <<'PY'
import json, sys
w = json.load(open(sys.argv[1]))
ticks = [float(l) for l in open(sys.argv[2]) if l.strip()]
print("viewers: %d of %d connected, %d dropped, %d frames missed, %.2f frames/s each; frame lag p50 %.0f ms, p99 %.0f ms, worst second p99 %.0f ms; node RSS %.0f MB"
      % (w["connected"], w["viewers"], w["disconnected"], w["missed"], w["frames_per_sec"], w["lag_p50_ms"], w["lag_p99_ms"], w["worst_second_p99_ms"], w.get("server_rss_mb", 0)))
print("freshness p99 at most %.0f ms (the longest tick %.0f ms + frame lag p99)" % (max(ticks) * 1000 + w["lag_p99_ms"], max(ticks) * 1000))
print("tick each second while the votes ran (s): " + " ".join("%g" % t for t in ticks))
PY
