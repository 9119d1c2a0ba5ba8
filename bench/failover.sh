#!/usr/bin/env bash
# An edge's failover when its region's only full node freezes or dies
# (issue 59): node/failover_test.go's TestEdgeFailover, ROUNDS times each
# of SIGSTOP (for FREEZE, then SIGCONT) and SIGKILL (then a restart),
# under a steady stream of votes through the edge, beside the full nodes
# of two other regions. It prints each round, then p50/p99/max of the
# time from each fault to the first vote another region's full node
# acknowledged through the edge, and from each return to the first the
# region's own took again. The test command runs one round of each, and
# timing fails nothing there.
#
#   ./bench/failover.sh      (ROUNDS=20, FREEZE=10s)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
export TALLY_FAILOVER_ROUNDS=${ROUNDS:-20} TALLY_FAILOVER_FREEZE=${FREEZE:-10s}
if ! go test ./node -run '^TestEdgeFailover$' -count=1 -v -timeout 60m > "$out" 2>&1; then
  tail -n 80 "$out"
  exit 1
fi
grep -E 'first vote|votes acknowledged' "$out" | sed 's/^ *failover_test.go:[0-9]*: //'
