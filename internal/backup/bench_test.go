package backup

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"tally/ledger"
)

// countingWriter counts the bytes of the stream.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// BenchmarkBackupMillionRecords measures what GET /v1/backup does on a
// ledger of 1,000,000 vote records: the Pebble checkpoint, then the tar
// stream of it. It reports the seconds of each and the stream's size.
//
//	go test ./internal/backup -run '^$' -bench BackupMillionRecords -benchtime 1x
func BenchmarkBackupMillionRecords(b *testing.B) {
	dir := b.TempDir()
	l, err := ledger.Open(ledger.Config{Dir: filepath.Join(dir, "live"), Replica: "eu-west-1"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	const n = 1_000_000
	batch := make([]ledger.Record, 0, 1000)
	for i := range n {
		batch = append(batch, ledger.Record{Poll: "bench", Voter: fmt.Sprint("v", i), Option: []string{"a", "b", "c"}[i%3],
			Idem: fmt.Sprint("k", i), Wall: int64(1_796_000_000_000 + i), Trust: 1, Counted: true})
		if len(batch) == cap(batch) {
			if _, err := l.Append(batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.ResetTimer()
	for i := range b.N {
		tmp := filepath.Join(dir, fmt.Sprint("snap", i))
		start := time.Now()
		if err := l.Checkpoint(filepath.Join(tmp, "ledger")); err != nil {
			b.Fatal(err)
		}
		ckpt := time.Since(start)
		var w countingWriter
		if err := Write(io.Writer(&w), tmp, Manifest{Replica: "eu-west-1"}); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(ckpt.Seconds(), "checkpoint-s")
		b.ReportMetric((time.Since(start) - ckpt).Seconds(), "stream-s")
		b.ReportMetric(float64(w.n)/1e6, "MB")
		os.RemoveAll(tmp)
	}
}
