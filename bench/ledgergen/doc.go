// Command ledgergen writes synthetic ledger exports for benchmarking the
// auditor's tools: N votes spread over R replicas, each replica ledgered by
// a real ledger and exported as NDJSON, with vote changes and cross-region
// retries mixed in.
//
//	go run ./bench/ledgergen -n 1000000 -replicas 3 -out /tmp/exports
package main
