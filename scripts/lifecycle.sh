#!/usr/bin/env bash
# The long run of the model-based lifecycle test: many seeded three-region
# clusters, longer step sequences. Usage: scripts/lifecycle.sh [RUNS] [STEPS]
# (defaults 200 and 60; about 5 s a run on two cores, 17 minutes in all). A failure prints its seed; replay it with
#   go test ./node -run TestLifecycleMatchesModel -rapid.seed=SEED
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-200}"
steps="${2:-60}"
TALLY_LIFECYCLE_CHECKS="$runs" go test -count=1 -timeout 3h -run TestLifecycleMatchesModel ./node -rapid.steps="$steps" -v |
  grep -v '\[rapid\] draw'
