package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"
)

// Format is the on-disk format of the ledgers this release writes: the
// key layout (keys.go) and the records' canonical encoding. A ledger
// states its format under formatKey; one without it was written before
// the key existed (v0.4.0 and earlier) in format 1.
//
// A release opens the formats from FormatMin to Format, so a node can be
// upgraded and rolled back one release at a time on the same data dir.
// A release that changes the format must keep writing the old one until
// an operator says the rollback window is over, and raise FormatMin only
// the release after (docs/operations.md "Versions and compatibility").
const (
	Format    = 1
	FormatMin = 1
)

// formatKey holds the ledger's format (a uvarint). The byte sorts apart
// from every other prefix (keys.go) and no scan covers it.
var formatKey = []byte{'v'}

// ErrFormat is returned by Open for a ledger in a format this release
// does not read.
var ErrFormat = errors.New("ledger: unsupported format")

// checkFormat reads the ledger's format, refusing one outside
// FormatMin..Format, and states Format in a writable ledger that states
// none yet.
func checkFormat(db *pebble.DB, dir string, readOnly bool) error {
	v, closer, err := db.Get(formatKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if readOnly {
			return nil // written before the key existed: format 1
		}
		if err := db.Set(formatKey, binary.AppendUvarint(nil, Format), pebble.Sync); err != nil {
			return fmt.Errorf("ledger: cannot state the format of %s: %w", dir, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("ledger: cannot read the format of %s: %w", dir, err)
	}
	f, n := binary.Uvarint(v)
	closer.Close()
	switch {
	case n <= 0:
		return fmt.Errorf("%w: %s states an unreadable format", ErrFormat, dir)
	case f > Format:
		return fmt.Errorf("%w: %s is in ledger format %d, newer than this release reads (%d to %d): run the release that wrote it, or a later one",
			ErrFormat, dir, f, FormatMin, Format)
	case f < FormatMin:
		return fmt.Errorf("%w: %s is in ledger format %d, older than this release reads (%d to %d): open it once with the release before this one, which rewrites it",
			ErrFormat, dir, f, FormatMin, Format)
	}
	return nil
}
