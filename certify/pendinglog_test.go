package certify

import (
	"testing"
	"time"
)

func TestPendingLogOnChangeAndWithBackOff(t *testing.T) {
	var l pendingLog
	t0 := time.Unix(0, 0)
	logged := 0
	for s := 0; s < 3600; s += 2 { // an hour of attempts every 2 s, one reason
		if l.should("p", "eu-1: unreachable", t0.Add(time.Duration(s)*time.Second)) {
			logged++
		}
	}
	if logged != 6 { // at 0, 1, 3, 7, 15 and 31 minutes (then every 30)
		t.Fatalf("an hour of one reason logged %d times, want 6", logged)
	}
	if !l.should("p", "eu-1: 3 of 5 records", t0.Add(time.Hour)) {
		t.Fatal("a new reason was not logged")
	}
	if !l.should("q", "eu-1: unreachable", t0.Add(time.Hour)) {
		t.Fatal("another poll's reason was not logged")
	}
	l.forget("p")
	if !l.should("p", "eu-1: 3 of 5 records", t0.Add(time.Hour+time.Second)) {
		t.Fatal("a forgotten poll's reason was not logged")
	}
}
