// Package gossiptest holds network faults for gossip tests: a memberlist
// transport wrapper that partitions nodes, and a TCP proxy that delays
// traffic (inter-region latency) or cuts it.
package gossiptest
