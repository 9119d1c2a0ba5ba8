#!/usr/bin/env bash
# The two-copy rule's cost (issue 48), side by side in one run: a region
# of two full nodes (each the other's buddy) and an edge, first on
# --ack-copies 1, then on fresh data dirs with --ack-copies 2. For each:
# the ack latency through the edge at $RATE votes/s, the two full nodes'
# CPU per vote (each is a primary and the other's buddy, so the sum is
# what a vote costs the region), the highest rate the first full node
# answers relay batches at (bench/relayload on its own relay subject, so
# the other takes none and only copies), records per fsync in its ledger
# and in its buddy's copy store. Loopback: a sender's write also runs the receiver's
# TCP path, and the buddy's round trip is a loopback one.
#
#   ./bench/copies.sh      (RATE=8000, DURATION=10s)
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${RATE:-8000}
dur=${DURATION:-10s}
. bench/lib.sh # $tmp, $pids and their cleanup, $tmp/node, $tmp/tally
go build -o "$tmp/relayload" ./bench/relayload
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # clock ticks, 100 a second
head -c 32 /dev/urandom | base64 > "$tmp/key"
common=(--rate-ip 0 --rate-voter 0 --trust-floor 0 --pow-bits 0 --demo=false --gossip-key-file "$tmp/key" --gossip-profile local
  --nats-gateway-addr '' --region eu-west)
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m { s += $2 } END { print s + 0 }'; }
# buckets PORT: the copy-time histogram's cumulative buckets, "le count" a line.
buckets() { curl -s "http://127.0.0.1:$1/metrics" | sed -n 's/^tally_buddy_seconds_bucket{le="\([^"]*\)"} \(.*\)/\1 \2/p'; }
# quantiles BEFORE AFTER: the copy's p50 and p99 in ms between two bucket
# snapshots (the upper bound of the bucket each falls in; "—" without copies).
quantiles() {
  python3 - "$1" "$2" <<'PY'
import sys
def read(s): return [(float('inf') if l.split()[0] == '+Inf' else float(l.split()[0]), float(l.split()[1])) for l in s.strip().splitlines()]
a, b = read(sys.argv[1] or "+Inf 0"), read(sys.argv[2] or "+Inf 0")
d = [(le, nb - na) for (le, nb), (_, na) in zip(b, a)] if len(a) == len(b) else []
n = d[-1][1] if d else 0
def q(p):
    for le, c in d:
        if c >= p * n: return "%.1f" % (le * 1000) if le != float('inf') else ">%.0f" % (d[-2][0] * 1000)
print(q(0.5), q(0.99)) if n else print("— —")
PY
}

# run COPIES: start the region on fresh data dirs, measure, print one row, stop it.
run() {
  local copies=$1 d=$tmp/c$1 a b e a0 b0 a1 b1 out votes vps p50 p99 s0 c0 s1 c1 bs0 bb0 bs1 bb1 acc
  "$tmp/node" --data-dir "$d/a" --http-addr 127.0.0.1:18381 --nats-addr 127.0.0.1:18382 --gossip-addr 127.0.0.1:18383 \
    --nats-cluster-addr 127.0.0.1:18384 --nats-leaf-addr 127.0.0.1:18385 --node-name a --ack-copies "$copies" "${common[@]}" > "$d.a.log" 2>&1 &
  a=$!; pids+=($a)
  until curl -sf http://127.0.0.1:18381/readyz >/dev/null; do kill -0 $a || { cat "$d.a.log"; exit 1; }; sleep 0.2; done
  "$tmp/node" --data-dir "$d/b" --http-addr 127.0.0.1:18391 --nats-addr 127.0.0.1:18392 --gossip-addr 127.0.0.1:18393 \
    --nats-cluster-addr 127.0.0.1:18394 --nats-leaf-addr 127.0.0.1:18395 --node-name b --join 127.0.0.1:18383 --ack-copies "$copies" "${common[@]}" > "$d.b.log" 2>&1 &
  b=$!; pids+=($b)
  until curl -sf http://127.0.0.1:18391/readyz >/dev/null; do kill -0 $b || { cat "$d.b.log"; exit 1; }; sleep 0.2; done
  "$tmp/node" --role edge --data-dir "$d/e" --http-addr 127.0.0.1:18401 --nats-addr 127.0.0.1:18402 --gossip-addr 127.0.0.1:18403 \
    --join 127.0.0.1:18383 --node-name e "${common[@]}" > "$d.e.log" 2>&1 &
  e=$!; pids+=($e)
  until curl -sf http://127.0.0.1:18401/readyz >/dev/null; do kill -0 $e || { cat "$d.e.log"; exit 1; }; sleep 0.2; done
  curl -sf -X POST http://127.0.0.1:18381/v1/polls -H 'Content-Type: application/json' \
    -H "Authorization: Bearer $(cat "$d/a/admin-token")" \
    -d '{"id":"p","question":"Copies?","options":[{"id":"red","label":"Red"},{"id":"green","label":"Green"},{"id":"blue","label":"Blue"},{"id":"gold","label":"Gold"}],"duration_s":3600}' >/dev/null
  until curl -sf http://127.0.0.1:18401/v1/polls/p >/dev/null && curl -sf http://127.0.0.1:18391/v1/polls/p >/dev/null; do sleep 0.2; done
  until curl -sf http://127.0.0.1:18401/v1/cluster | python3 -c 'import json,sys; m=json.load(sys.stdin)["members"]; sys.exit(0 if sum(1 for x in m if x.get("role")=="full")==2 else 1)' 2>/dev/null; do sleep 0.2; done

  local h0 h1 by0 br0 by1 br1 q
  h0=$(buckets 18381)
  a0=$(cpu $a); b0=$(cpu $b)
  out=$("$tmp/tally" load --url http://127.0.0.1:18401 --poll p --rate "$rate" --duration "$dur" --connections 400 --json 2>/dev/null)
  a1=$(cpu $a); b1=$(cpu $b)
  h1=$(buckets 18381)
  q=$(quantiles "$h0" "$h1")
  read -r votes vps p50 p99 < <(echo "$out" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["votes"], r["votes_per_sec"], r["p50_ms"], r["p99_ms"])')

  s0=$(metric 18381 tally_ledger_batch_records_sum); c0=$(metric 18381 tally_ledger_batch_records_count)
  bs0=$(metric 18391 tally_buddy_stored_records_total); bb0=$(metric 18391 tally_buddy_stored_batches_total)
  by0=$(metric 18381 tally_buddy_bytes_total); br0=$(metric 18381 tally_buddy_records_total)
  local ra0 rb0 ra1 rb1
  ra0=$(cpu $a); rb0=$(cpu $b)
  out2=$("$tmp/relayload" --nats nats://127.0.0.1:18382 --key-file "$tmp/key" --poll p --duration "$dur" --batch "${BATCH:-256}" --inflight "${INFLIGHT:-16}" \
    --replica "$(cat "$d/a/replica-id")")
  ra1=$(cpu $a); rb1=$(cpu $b)
  s1=$(metric 18381 tally_ledger_batch_records_sum); c1=$(metric 18381 tally_ledger_batch_records_count)
  bs1=$(metric 18391 tally_buddy_stored_records_total); bb1=$(metric 18391 tally_buddy_stored_batches_total)
  by1=$(metric 18381 tally_buddy_bytes_total); br1=$(metric 18381 tally_buddy_records_total)
  acc=$(echo "$out2" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["accepted"], "%.0f" % r["votes_per_sec"])')
  echo "relayload, --ack-copies $copies: $out2" >&2 # refusals, by code, show here
  awk -v n="$copies" -v v="$votes" -v r="$vps" -v fa=$((a1 - a0)) -v fb=$((b1 - b0)) -v p50="$p50" -v p99="$p99" \
    -v acc="${acc% *}" -v arate="${acc#* }" -v ra=$((ra1 - ra0)) -v rb=$((rb1 - rb0)) \
    -v s="$s1" -v s0="$s0" -v c="$c1" -v c0="$c0" -v bs="$bs1" -v bs0="$bs0" -v bb="$bb1" -v bb0="$bb0" \
    -v by="$by1" -v by0="$by0" -v br="$br1" -v br0="$br0" -v q="$q" \
    'BEGIN { split(q, cq, " ");
      printf "| %s | %.0f | %s | %s | %s / %s | %.1f | %s | %.1f | %.1f | %.0f | %s | %s |\n", n, r, p50, p99, cq[1], cq[2], (fa + fb) * 10000 / v, arate,
      ra * 10000 / acc, rb * 10000 / acc, (s - s0) / (c - c0), (bb > bb0 ? sprintf("%.0f", (bs - bs0) / (bb - bb0)) : "—"),
      (br > br0 ? sprintf("%.0f", (by - by0) / (br - br0)) : "—") }'
  kill $e $b $a
  wait $e $b $a 2>/dev/null || true
}
echo "| --ack-copies | votes/s acked through the edge at $rate/s | ack p50 ms | ack p99 ms | the copy's p50 / p99 ms | both full nodes' CPU µs/vote | relay batches: votes/s at the first full node | its CPU µs/vote | its buddy's CPU µs/vote | records per fsync, ledger | records per fsync, buddy's store | copy bytes per vote |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
run 1
run 2
