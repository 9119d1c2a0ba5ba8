// Command relayload stands in for many edges: it sends relay batches
// (package relay) of single votes to a full node's embedded NATS, sealed
// with the cluster key, as fast as the node answers them, and prints what
// came back. bench/relay.sh runs it; it is not a test.
//
//	relayload --nats nats://127.0.0.1:4222 --key-file KEY --poll p [--batch 256] [--inflight 16] [--duration 10s]
package main
