#!/usr/bin/env bash
# The rolling upgrade run (docs/operations.md "Upgrade"): builds the
# previous release from its git tag ($TALLY_PREVIOUS, or the newest tag
# among HEAD's ancestors not on HEAD), starts three regions of two full
# nodes (--ack-copies 2) and an edge each on it, votes through the edges,
# upgrades every process to this build as the chart rolls (a full node of
# each region at once, edges alongside), rolls every one back one at a
# time, then certifies. It prints what the voters met in each phase.
# About 2 minutes here; needs a clone with its tags (git fetch --tags).
set -euo pipefail
cd "$(dirname "$0")/.."
TALLY_UPGRADE=1 exec go test ./node -run '^TestRollingUpgradeAndRollback$' -count=1 -v -timeout 30m "$@"
