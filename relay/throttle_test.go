package relay

import (
	"testing"
	"time"
)

func TestThrottleLetsOneLineThroughPerInterval(t *testing.T) {
	th := &throttle{every: 5 * time.Second}
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	if ok, n := th.allow(t0); !ok || n != 0 {
		t.Fatalf("first: %v %d", ok, n)
	}
	for i := range 100 {
		if ok, _ := th.allow(t0.Add(time.Duration(i) * 10 * time.Millisecond)); ok {
			t.Fatalf("line %d within the interval let through", i)
		}
	}
	if ok, n := th.allow(t0.Add(5 * time.Second)); !ok || n != 100 {
		t.Fatalf("after the interval: %v, %d suppressed, want 100", ok, n)
	}
}
