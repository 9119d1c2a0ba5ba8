#!/usr/bin/env bash
# Voter receipts' costs for BENCHMARKS.md "Receipts" (about two minutes):
#   - a vote's answer with and without its receipt: the full node's side
#     of the relay per vote (BenchmarkVoteBatch votes / receipts: the
#     signature is the difference), the receipt's bytes and encoding;
#   - the tree a certificate signs, for 1,000,000 records; the index a
#     node builds before it answers proofs; a proof's bytes and the time
#     to serve one; a voter's check of it (two Ed25519 signatures, the
#     record, 20 path hashes);
#   - with BEFORE=REV, certification of 1,000,000 votes across three
#     regions at REV (a worktree of it) and here, one after the other
#     (bench/certify.sh's benchmark, RUNS=n rounds).
# Figures are printed; nothing is asserted about time.
set -euo pipefail
cd "$(dirname "$0")/.."
filter() { grep -E '^(Benchmark|ok|FAIL|---|    .*index)' || true; }
go test ./ingest -run '^$' -bench 'VoteBatch/(votes|receipts)' -benchmem -count "${RUNS:-3}" 2>&1 | filter
go test ./receipt -run '^$' -bench . -benchmem 2>&1 | filter
go test ./certify -run '^$' -bench 'TreeHeadMillion|ProofMillion' -benchtime 5x -v 2>&1 | filter
if [ -n "${BEFORE:-}" ]; then
  wt=$(mktemp -d)
  trap 'git worktree remove --force "$wt" >/dev/null 2>&1 || true' EXIT
  git worktree add -f --detach "$wt" "$BEFORE" >/dev/null
  for round in $(seq "${RUNS:-1}"); do
    echo "round $round: certification of 1,000,000 votes at $BEFORE (before)"
    (cd "$wt" && go test ./node -run '^$' -bench 'CertifyMillionVotes/^prefetch$' -benchtime 1x -timeout 30m 2>&1 | filter)
    echo "round $round: the same here (after)"
    go test ./node -run '^$' -bench 'CertifyMillionVotes/^prefetch$' -benchtime 1x -timeout 30m 2>&1 | filter
  done
fi
