#!/usr/bin/env bash
# The broadcast night on one machine (issue 15): three regions as separate
# node processes, voters like the page, WebSocket viewers in every region,
# then close, grace and certification; one table at the end (see
# bench/night/doc.go). Figures go to BENCHMARKS.md.
#
#   ./bench/night.sh --small     # 100,000 votes, 2,000 viewers, under a minute
#   ./bench/night.sh             # 1,000,000 votes in a 30 s broadcast shape, 15,000 viewers
#   ./bench/night.sh --edges 2   # the same through 2 edges a region: viewers on the edges,
#                                # votes on their sockets, and the fleet model beside it
#                                # (about 5 minutes; --small --edges 2 under a minute)
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/node" ./cmd/node
go build -o "$tmp/night" ./bench/night
"$tmp/night" --node-bin "$tmp/node" --dir "$tmp/data" "$@"
