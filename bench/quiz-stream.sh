#!/usr/bin/env bash
# A quiz question's thundering herd on the quiz's stream, for
# BENCHMARKS.md: one node; PARTICIPANTS participants each on their own
# WebSocket to GET /v1/quizzes/{quiz}/live (tally quiz swarm); the host
# starts the question; each participant answers on its socket at a random
# moment within 2 s of receiving the question's frame; the host closes and
# reveals it; each participant waits for its own standing. Prints the
# swarm's report (question frame arrival, acks, the node's timing
# overhead, standings), how many records shared an fsync, the node's
# frames and CPU. Stops everything it started.
#
#   bench/quiz-stream.sh          (PARTICIPANTS=10000)
set -euo pipefail
cd "$(dirname "$0")/.."
participants=${PARTICIPANTS:-10000}
. bench/lib.sh
start_node 18282
curl -sf -X POST $url/v1/quizzes -H "$auth" -H 'Content-Type: application/json' \
  -d '{"id":"herd","questions":[{"text":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"},{"id":"c","label":"C"},{"id":"d","label":"D"}],"correct":["b"],"limit_ms":20000}]}' >/dev/null
cpu() { awk '{ print $14 + $15 }' "/proc/$node/stat"; }

"$tmp/tally" quiz swarm --url $url --quiz herd --participants "$participants" --per-ip 1000 --ramp 20s \
  --within 2s --timeout 3m --json > "$tmp/swarm.json" 2> "$tmp/swarm.log" &
swarm=$!; pids+=($swarm)
wait_line "$tmp/swarm.log" "connected $participants/$participants" "$swarm"
sleep 2
b0=$(metric tally_ledger_batch_records_sum); c0=$(metric tally_ledger_batch_records_count)
f0=$(metric 'tally_frames_sent_total{transport="websocket"}'); t0=$(cpu)
curl -sf -X POST $url/v1/quizzes/herd/start -H "$auth" >/dev/null
# Every answer is in once the question counts them all (or 10 s have passed).
for _ in $(seq 100); do
  n=$(curl -sf $url/v1/quizzes/herd | grep -o '"answers":[0-9]*' | head -1 | cut -d: -f2)
  [ "${n:-0}" -ge "$participants" ] && break
  sleep 0.1
done
b1=$(metric tally_ledger_batch_records_sum); c1=$(metric tally_ledger_batch_records_count)
f1=$(metric 'tally_frames_sent_total{transport="websocket"}'); t1=$(cpu)
curl -sf -X POST $url/v1/quizzes/herd/close -H "$auth" >/dev/null
curl -sf -X POST $url/v1/quizzes/herd/reveal -H "$auth" >/dev/null
wait "$swarm" || true

echo "== $participants participants on the quiz's stream, answering within 2 s of the question frame"
cat "$tmp/swarm.json"
awk -v b="$((${b1%.*} - ${b0%.*}))" -v c="$((${c1%.*} - ${c0%.*}))" 'BEGIN { if (c > 0) printf "records per fsync: %.1f (%d records in %d synced batches)\n", b / c, b, c }'
hz=$(getconf CLK_TCK)
awk -v f="$((${f1%.*} - ${f0%.*}))" -v t="$((t1 - t0))" -v hz="$hz" 'BEGIN { printf "burst: %d frames to sockets (acks not counted), node CPU %.2f s\n", f, t / hz }'
