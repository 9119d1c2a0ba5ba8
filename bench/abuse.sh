#!/usr/bin/env bash
# The token-farming simulation of issue 25 for BENCHMARKS.md (about a
# minute on 2 cores): a three-region cluster in-process on loopback, 3,000
# honest voters, an attacker with one IPv4 address, an IPv6 /48 and 20
# datacenter addresses farming tokens at every region, a venue and a
# carrier NAT of 200 behind one address each, and a quiz with sybils
# covering every combination of answers. It runs without vouching (the
# budget's hard limit alone) and as shipped, and prints the figures;
# nothing is asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
go test ./node -run '^$' -bench 'AbuseSimulation' -benchtime "${RUNS:-1}x" -timeout 20m 2>&1 |
	grep -Ev '^(goos|goarch|pkg|cpu):'
