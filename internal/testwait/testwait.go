package testwait

import (
	"testing"
	"time"
)

// For polls cond every few milliseconds until it holds, and fails the
// test naming what it waited for when timeout passes first.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not before the deadline (%s): %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
