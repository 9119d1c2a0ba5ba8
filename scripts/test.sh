#!/usr/bin/env bash
# The test command: format check, vet, and every test with the race detector.
# README.md names it and .ci/run calls it; keep the list here only.
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
# The model-based lifecycle test (node/lifecycle_test.go) runs this many
# seeded clusters here; scripts/lifecycle.sh runs far more.
export TALLY_LIFECYCLE_CHECKS="${TALLY_LIFECYCLE_CHECKS:-12}"
go test -race -count=1 "$@" ./...
