#!/usr/bin/env bash
# The thundering herd of a quiz question, for BENCHMARKS.md: one node, a
# question started by the host, VIEWERS participants watching it on
# WebSocket (tally watch --swarm), then PARTICIPANTS distinct participants
# answering it within 2 seconds (tally load: 1 answer each, over HTTP, at
# PARTICIPANTS/2 per second). Prints the acknowledgements (status codes,
# latency percentiles), how many records shared an fsync, the frames the
# viewers got (delivery lag), and the leaderboard's freshness: the time
# from the host's close to a leaderboard that counts the question
# (certification, with the default --certify-settle of 1 s). Stops
# everything it started.
#
#   bench/quiz.sh                 (PARTICIPANTS=10000 VIEWERS=2000)
set -euo pipefail
cd "$(dirname "$0")/.."
participants=${PARTICIPANTS:-10000}
viewers=${VIEWERS:-2000}
. bench/lib.sh
start_node 18281
curl -sf -X POST $url/v1/quizzes -H "$auth" -H 'Content-Type: application/json' \
  -d '{"id":"herd","questions":[{"text":"Which?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"},{"id":"c","label":"C"},{"id":"d","label":"D"}],"correct":["b"],"limit_ms":60000}]}' >/dev/null
curl -sf -X POST $url/v1/quizzes/herd/start -H "$auth" >/dev/null
# Revealed at once, so every tick of the burst changes the counts and goes
# out to every viewer: the fan-out's worst case (a hidden question sends
# its viewers nothing but the viewer count and heartbeats).
curl -sf -X POST $url/v1/quizzes/herd/reveal -H "$auth" >/dev/null
b0=$(metric tally_ledger_batch_records_sum); c0=$(metric tally_ledger_batch_records_count)

# The viewers join (their ramp, then 2 s to settle) and are measured for
# 12 s; the answers come 1 s into that. The swarm's own votes name options
# the question does not have: refused, they change nothing.
"$tmp/tally" watch --url $url --poll herd-1 --swarm "$viewers" --per-ip 1000 --ramp 3s --duration 12s \
  --votes-per-sec 1 --server-pid "$node" --json > "$tmp/swarm.json" 2> "$tmp/swarm.log" &
swarm=$!; pids+=($swarm)
wait_line "$tmp/swarm.log" "connected $viewers/$viewers" "$swarm"
sleep 3
"$tmp/tally" load --url $url --poll herd-1 --voters "$participants" --rate $((participants / 2)) --duration 2s \
  --batch 1 --changes 0 --retries 0 --connections 256 --options a,b,c,d --json > "$tmp/load.json" 2> "$tmp/load.log"
b1=$(metric tally_ledger_batch_records_sum); c1=$(metric tally_ledger_batch_records_count)
wait "$swarm" || true

closed=$(date +%s%N)
curl -sf -X POST $url/v1/quizzes/herd/close -H "$auth" >/dev/null
until curl -sf "$url/v1/quizzes/herd/leaderboard" | grep -q '"counted":\[0\]'; do sleep 0.02; done
fresh=$(( ($(date +%s%N) - closed) / 1000000 ))
lb=$(curl -sf "$url/v1/quizzes/herd/leaderboard?top=1")

echo "== answers ($participants participants, at $((participants / 2))/s for 2 s, 256 connections)"
cat "$tmp/load.json"
awk -v b="$((${b1%.*} - ${b0%.*}))" -v c="$((${c1%.*} - ${c0%.*}))" 'BEGIN { if (c > 0) printf "records per fsync: %.1f (%d records in %d synced batches)\n", b / c, b, c }'
echo "== viewers ($viewers on the question's live stream)"
cat "$tmp/swarm.json"
echo "== leaderboard"
echo "close → leaderboard counting the question: ${fresh} ms"
echo "$lb" | head -c 400; echo
