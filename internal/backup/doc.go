// Package backup packs a node's backup into a tar stream and unpacks it
// safely: a Pebble checkpoint of the ledger and the small files that make
// the replica what it is (its id, signing key, clock mark), with a
// manifest. The node writes the stream (GET /v1/backup); `tally ledger
// backup` reads it and `tally ledger restore` puts it in a data dir.
//
// Unpacking treats the stream as hostile: only regular files and
// directories under the target, no absolute paths, no "..", no links, a
// size cap, and the manifest must come first.
package backup
