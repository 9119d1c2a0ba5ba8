#!/usr/bin/env bash
# Close-and-certify benchmarks for BENCHMARKS.md (about a minute a run):
#   - 1,000,000 votes across three in-process regions: seconds from close +
#     grace to the certified result at every region;
#   - restart of a node whose ledger holds 1,000,000 votes, without and with
#     the checkpoint.
# Figures are printed; nothing is asserted about time. RUNS=n repeats them.
set -euo pipefail
cd "$(dirname "$0")/.."
filter() { grep -E '^(Benchmark|ok|FAIL|---)' || true; }
go test ./node -run '^$' -bench 'CertifyMillionVotes|RestartMillionRecords' -benchtime 1x -count "${RUNS:-1}" -timeout 30m 2>&1 | filter
