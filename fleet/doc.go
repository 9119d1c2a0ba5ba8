// Package fleet is Tally's capacity model: from a night (votes, window,
// burst, viewers, regions, the machines) and per-process figures measured
// on a real machine (bench/fleet-figures.sh writes them, bench/fleet/
// figures.json holds the last run and figures.json here its copy, built
// in: Default), it plans the fleet — full nodes and
// edges per region, each one's CPU and memory at the peak, the bytes on
// each NATS link, the ack and freshness it predicts, the time to certify —
// and says what sets the counts. `tally fleet plan` prints it; every
// formula is in docs/capacity.md, and bench/fleet.sh checks the
// predictions against a cluster of real processes.
//
// It imports nothing of this module.
package fleet
