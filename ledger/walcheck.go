package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/vfs"
)

// ErrDamaged is returned by Open when the ledger's files are damaged in a
// way that would lose synced records if Pebble opened them.
var ErrDamaged = errors.New("ledger: damaged")

// DamageError says where the write-ahead log is damaged. It wraps ErrDamaged.
type DamageError struct {
	File      string // the WAL file
	Offset    int64  // where the first bad chunk starts
	NextValid int64  // where a valid chunk of the same log starts after it
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("ledger: damaged: write-ahead log %s has a bad record at byte %d and valid records after it (from byte %d): opening it would drop them",
		e.File, e.Offset, e.NextValid)
}

func (e *DamageError) Unwrap() error { return ErrDamaged }

// The WAL's framing (Pebble's record package, recyclable format, which is
// the only one Pebble's log writer produces): 32 KiB blocks of chunks, each
// chunk a header of masked CRC-32C (4), payload length (2), type (1) and
// log number (4), then the payload.
const (
	walBlock       = 32 << 10
	walHeader      = 11
	walFirstType   = 5 // recyclable full
	walLastType    = 8 // recyclable last
	walLogNumShift = 7
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkWAL reads the newest write-ahead log in dir. Pebble replays that
// log up to its first bad chunk and treats the rest as a torn tail, which
// is right after a crash (the tail was never synced, so never
// acknowledged) and wrong when a chunk in the middle went bad: the synced
// records after it would be dropped silently and their sequence numbers
// reused. So: a bad chunk with nothing valid of the same log after it is a
// torn tail (nil); a bad chunk followed by a valid one is damage
// (*DamageError). Older logs are replayed strictly by Pebble itself.
func checkWAL(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return nil // no directory yet: nothing to check
	}
	var newest string
	var num uint64
	for _, name := range names {
		stem, ok := strings.CutSuffix(name, ".log")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(stem, 10, 64); err == nil && (newest == "" || n > num) {
			newest, num = name, n
		}
	}
	if newest == "" {
		return nil
	}
	path := fs.PathJoin(dir, newest)
	f, err := fs.Open(path)
	if err != nil {
		return fmt.Errorf("ledger: cannot read %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("ledger: cannot read %s: %w", path, err)
	}
	logNum := uint32(num)
	bad := firstBadChunk(data, logNum)
	if bad < 0 {
		return nil
	}
	if next := nextValidChunk(data, logNum, bad+1); next >= 0 {
		return &DamageError{File: path, Offset: int64(bad), NextValid: int64(next)}
	}
	return nil
}

// validChunk reports the length of the chunk at off (header and payload)
// when it is a well-formed chunk of log logNum, or 0.
func validChunk(data []byte, logNum uint32, off int) int {
	inBlock := off % walBlock
	if off+walHeader > len(data) || inBlock+walHeader > walBlock {
		return 0
	}
	h := data[off : off+walHeader]
	typ := h[6]
	if typ < walFirstType || typ > walLastType || binary.LittleEndian.Uint32(h[walLogNumShift:]) != logNum {
		return 0
	}
	n := int(binary.LittleEndian.Uint16(h[4:6]))
	end := off + walHeader + n
	if end > len(data) || inBlock+walHeader+n > walBlock {
		return 0
	}
	c := crc32.Update(0, castagnoli, data[off+6:end]) // type, log number, payload
	if binary.LittleEndian.Uint32(h[0:4]) != (c>>15|c<<17)+0xa282ead8 {
		return 0
	}
	return walHeader + n
}

// firstBadChunk walks the chunks from the start and returns the offset of
// the first one that is not valid, or -1 when every chunk is valid to the
// end of the file. A block's tail shorter than a header is padding.
func firstBadChunk(data []byte, logNum uint32) int {
	off := 0
	for off < len(data) {
		if rest := walBlock - off%walBlock; rest < walHeader {
			off += rest
			continue
		}
		n := validChunk(data, logNum, off)
		if n == 0 {
			return off
		}
		off += n
	}
	return -1
}

// nextValidChunk returns the offset of the first valid chunk of the log at
// or after from, or -1. Chunks start anywhere within a block, so every
// offset is tried; the type byte and the log number rule out almost all of
// them before any checksum is computed.
func nextValidChunk(data []byte, logNum uint32, from int) int {
	for off := from; off+walHeader <= len(data); off++ {
		if t := data[off+6]; t < walFirstType || t > walLastType {
			continue
		}
		if validChunk(data, logNum, off) > 0 {
			return off
		}
	}
	return -1
}
