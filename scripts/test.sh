#!/usr/bin/env bash
# The test command: format check, vet, staticcheck, govulncheck, redocly's
# OpenAPI lint, and every test with the race detector. README.md names it and .ci/run calls it; keep
# the list here only.
#
# staticcheck and govulncheck are installed from the Go module proxy into
# ~/.cache/tally-tools where missing (pinned versions below), and the
# vulnerability database is built there from the golang.org/x/vulndb module
# (the proxy serves it; vuln.go.dev may not be reachable). They run beside
# the tests, which leave a core idle much of the time, and any finding fails
# the command.
set -euo pipefail
cd "$(dirname "$0")/.."
# go.mod's toolchain line (a Go release with the standard library's
# security fixes) is fetched from the module proxy when the local Go is older.
export GOTOOLCHAIN=auto

redocly_version=2.77.0
staticcheck_version=v0.8.2
govulncheck_version=v1.9.0
vulndb_version=v0.0.0-20261105234957-e22db6528018
tools="${TALLY_TOOLS:-$HOME/.cache/tally-tools}"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
# Everything is compiled once, with the race detector: vet (which compiles
# every package and test, and computes facts over every dependency) builds
# the cache the tests and, through GOFLAGS, staticcheck and govulncheck read.
# A separate non-race build would double the first run's compile time.
go vet -race ./...
echo "compiled and vetted in ${SECONDS} s"
# The node binary that process-level tests run (node, cmd/node and the
# JavaScript client's), built once, from the same race-instrumented cache:
# the tests' processes run under the race detector too.
node_bin_dir=$(mktemp -d)
trap 'rm -rf "$node_bin_dir"' EXIT
go build -race -o "$node_bin_dir/tally-node" ./cmd/node
export TALLY_NODE_BIN="$node_bin_dir/tally-node"

# analyse: staticcheck and govulncheck, installed where missing.
analyse() {
  mkdir -p "$tools/bin"
  [ -x "$tools/bin/staticcheck-$staticcheck_version" ] || {
    GOBIN="$tools/bin" go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version" &&
      mv "$tools/bin/staticcheck" "$tools/bin/staticcheck-$staticcheck_version"; }
  [ -x "$tools/bin/govulncheck-$govulncheck_version" ] || {
    GOBIN="$tools/bin" go install "golang.org/x/vuln/cmd/govulncheck@$govulncheck_version" &&
      mv "$tools/bin/govulncheck" "$tools/bin/govulncheck-$govulncheck_version"; }
  local db="$tools/vulndb-$vulndb_version"
  if [ ! -f "$db/index/db.json" ]; then
    go mod download "golang.org/x/vulndb@$vulndb_version"
    rm -rf "$db.tmp"
    go run "golang.org/x/vulndb/cmd/indexdb@$vulndb_version" \
      -vulns "$(go env GOMODCACHE)/golang.org/x/vulndb@$vulndb_version/data/osv" -out "$db.tmp"
    mv "$db.tmp" "$db"
  fi
  local rc=0
  echo "staticcheck $staticcheck_version:"
  GOFLAGS="${GOFLAGS:+$GOFLAGS }-race" "$tools/bin/staticcheck-$staticcheck_version" ./... || rc=1
  echo "govulncheck $govulncheck_version (database golang.org/x/vulndb@$vulndb_version):"
  GOFLAGS="${GOFLAGS:+$GOFLAGS }-race" "$tools/bin/govulncheck-$govulncheck_version" -db "file://$db" ./... || rc=1
  # The OpenAPI document under Redocly's recommended rules (the justified
  # exceptions are in .redocly.lint-ignore.yaml), installed from npm.
  local redocly="$tools/redocly-$redocly_version/node_modules/.bin/redocly"
  if [ ! -x "$redocly" ] && command -v npm >/dev/null 2>&1; then
    npm install --silent --no-audit --no-fund --prefix "$tools/redocly-$redocly_version" "@redocly/cli@$redocly_version" >/dev/null 2>&1 || true
  fi
  if [ -x "$redocly" ]; then
    echo "redocly lint $redocly_version:"
    "$redocly" lint --format stylish docs/openapi.yaml 2>&1 | grep -v '^ *║\|^ *╔\|^ *╚\|^$' || true
    "$redocly" lint docs/openapi.yaml >/dev/null 2>&1 || rc=1
  elif [ "${CI:-}" = true ]; then
    echo "redocly: npm is missing, and CI=true needs the OpenAPI lint"; rc=1
  else
    echo "SKIPPED redocly lint: npm is missing (apt-get install npm)" | tee -a "$skipped"
  fi
  return $rc
}
analysis_log=$(mktemp)
skipped=$(mktemp) # one line per suite skipped for want of a program
js_log=$(mktemp)
trap 'rm -f "$analysis_log" "$skipped" "$js_log"; rm -rf "$node_bin_dir"' EXIT
# The suites that need programs from outside Go skip without them (and fail
# with CI=true): say so at the end, with how to get them.
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1 ||
  echo "SKIPPED the browser tests (node TestBrowser*): Chromium is missing (apt-get install chromium)" >> "$skipped"
[ -f "${TALLY_AXE:-$HOME/.cache/tally-axe/node_modules/axe-core/axe.min.js}" ] ||
  echo "SKIPPED the accessibility checks of the browser views: axe-core is missing (npm install --prefix ~/.cache/tally-axe axe-core@4, or TALLY_AXE=path/to/axe.min.js)" >> "$skipped"
command -v helm >/dev/null 2>&1 || [ -n "${TALLY_HELM:-}" ] ||
  echo "SKIPPED the Helm chart's checks (deploy TestHelm*): helm is missing (go install helm.sh/helm/v4/cmd/helm@v4.3.2, or TALLY_HELM=path/to/helm)" >> "$skipped"
command -v promtool >/dev/null 2>&1 ||
  echo "SKIPPED the Prometheus config and alert-rule checks (deploy): promtool is missing (apt-get install prometheus)" >> "$skipped"
analyse > "$analysis_log" 2>&1 &
analysis=$!

# The model-based lifecycle test (node/lifecycle_test.go) runs this many
# seeded clusters here; scripts/lifecycle.sh runs far more.
export TALLY_LIFECYCLE_CHECKS="${TALLY_LIFECYCLE_CHECKS:-3}"
# The JavaScript client (clients/js) against a real node: node --test,
# Node.js 20+ (its WebSocket behind --experimental-websocket), on the same
# race-built binary, beside the Go tests.
js() {
  (cd clients/js && node --experimental-websocket --test test/)
}
js_pid=
if command -v node >/dev/null 2>&1 && [ "$(node -p 'process.versions.node.split(".")[0] >= 20')" = true ]; then
  js > "$js_log" 2>&1 &
  js_pid=$!
elif [ "${CI:-}" = true ]; then
  echo "the JavaScript client's tests need Node.js 20+ (apt-get install npm), and CI=true needs them" > "$js_log"
  js_pid=fail
else
  echo "SKIPPED the JavaScript client's tests (clients/js): Node.js 20+ is missing (apt-get install npm)" >> "$skipped"
fi

# -p 4 -parallel 4 on two cores: the slow tests (node's process, cluster
# and browser tests, which call t.Parallel) mostly wait on processes,
# sockets and timers, not on a core. The slowest packages are named first
# so that they start first; ./... adds the rest. -vet=off: go vet ran
# above with every check, go test's own is a subset of it.
tests=0
go test -race -vet=off -count=1 -p 4 -parallel 4 "$@" ./node/ ./ledger/ ./gossip/ ./ingest/ ./cmd/tally/ ./... || tests=$?

if [ "$js_pid" = fail ]; then
  cat "$js_log"; tests=1
elif [ -n "$js_pid" ]; then
  js_rc=0
  wait "$js_pid" || js_rc=$?
  echo "JavaScript client (clients/js):"
  if [ "$js_rc" = 0 ]; then grep -E '^# (tests|pass|fail) ' "$js_log"; else cat "$js_log"; tests=1; fi
fi

echo "tests done at ${SECONDS} s"
analysis_rc=0
wait "$analysis" || analysis_rc=$?
echo
cat "$analysis_log"
if [ "$analysis_rc" != 0 ]; then
  echo "static analysis found problems (above)"
fi
if [ -s "$skipped" ]; then
  echo
  sort -u "$skipped"
  echo "(CI installs them all: .ci/run)"
fi
if [ "$tests" != 0 ]; then
  echo
  echo "FAILED: tests (go test above, or the JavaScript client's, whose summary is above)"
fi
echo "finished in ${SECONDS} s"
[ "$tests" = 0 ] && [ "$analysis_rc" = 0 ]
