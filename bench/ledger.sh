#!/usr/bin/env bash
# Ledger benchmarks for BENCHMARKS.md: Append at 1/64/256 writers (our commit
# pipeline side by side with Pebble's own group commit), Reconcile and Replay
# of 1,000,000 records, and the auditor's merge of 1,000,000 exported records.
set -euo pipefail
cd "$(dirname "$0")/.."
go test ./ledger -run '^$' -bench 'Append' -benchtime "${APPEND_N:-100000}x"
go test ./ledger -run '^$' -bench 'Reconcile|Replay' -benchtime 3x -benchmem

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/tally" ./cmd/tally
go run ./bench/ledgergen -n 1000000 -replicas 3 -out "$tmp/exports" >/dev/null
start=$(date +%s.%N)
"$tmp/tally" ledger merge --json "$tmp"/exports/*.ndjson | grep -E '"(records|total|digest)"'
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" 'BEGIN { printf "tally ledger merge of 1000000 exported records: %.2fs, %.0f records/s\n", e-s, 1000000/(e-s) }'
