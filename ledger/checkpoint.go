package ledger

import (
	"fmt"

	"github.com/cockroachdb/pebble"
)

// Checkpoint writes a consistent copy of the ledger into dir, which must
// not exist, while appends go on: every record acknowledged before the
// call is in it, with its chain head and the metadata of the same instant.
// Pebble hard-links the immutable tables, so on the same file system it
// costs little space at first; dir opens as a ledger of its own.
func (l *Ledger) Checkpoint(dir string) error {
	release, err := l.metaOpen()
	if err != nil {
		return err
	}
	defer release()
	// WithFlushedWAL syncs the write-ahead log first, so batches already
	// applied but not yet fsynced by the syncer are in the copy too.
	if err := l.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("ledger: checkpoint: %w", err)
	}
	return nil
}
