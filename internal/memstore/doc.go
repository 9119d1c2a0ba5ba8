// Package memstore is a metadata store in memory for tests: what the
// ledger's metadata space (PutMeta, PutMetaBatch, DeleteMetaRange,
// MetaWithPrefix) keeps across a restart, without a disk. It is safe for
// concurrent use.
package memstore
