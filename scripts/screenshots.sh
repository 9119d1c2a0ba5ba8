#!/usr/bin/env bash
# Regenerates docs/screenshots/ from the browser tests (headless Chromium,
# each view at a phone's and a desktop's size, axe-core checked).
#   ./scripts/screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TALLY_SCREENSHOTS=docs go test -count=1 -run 'TestBrowser' ./node
ls docs/screenshots
