package testwait

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records instead of stopping.
type recorder struct {
	testing.TB
	failed atomic.Value
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed.Store(format)
}

func TestForWaitsAndFails(t *testing.T) {
	n := 0
	For(t, time.Second, "three looks", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("looked %d times", n)
	}
	r := &recorder{TB: t}
	calls := 0
	For(r, 20*time.Millisecond, "never", func() bool { calls++; return r.failed.Load() != nil })
	if f, _ := r.failed.Load().(string); !strings.Contains(f, "not before the deadline") || calls < 2 {
		t.Fatalf("a condition that never holds: failed %q after %d looks", f, calls)
	}
}
