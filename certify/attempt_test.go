package certify

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tally/hlc"
	"tally/ledger"
	"tally/poll"
	"tally/state"
)

// A panic anywhere in one attempt is recorded as a pending certificate
// naming the fault, counted, and leaves the certifier able to try again.
func TestAttemptRecoversFromPanic(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	led, err := ledger.Open(ledger.Config{Dir: "l", FS: vfs.NewMem(), Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	st, err := state.New(state.Config{Replica: "eu-1", Store: led})
	if err != nil {
		t.Fatal(err)
	}
	clock, err := hlc.New(hlc.Config{Replica: "eu-1", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := clock.Now()
	def := poll.Definition{ID: "p", Question: "Q?", Options: []poll.Option{{ID: "a", Label: "A"}, {ID: "b", Label: "B"}},
		OpensAt: now.Add(-time.Hour).UnixMilli(), ClosesAt: now.Add(-time.Minute).UnixMilli()}
	if _, err := st.Defs.PutPoll(def, ts); err != nil {
		t.Fatal(err)
	}
	panics := true
	reg := prometheus.NewRegistry()
	c, err := New(Config{
		State: st, Ledger: led, Replica: "eu-1", Name: "n1", Full: true, Clock: clock, Registerer: reg,
		Peers: func() []Peer {
			if panics {
				panic("injected")
			}
			return []Peer{{Name: "n1", Replica: "eu-1", Full: true}}
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:    func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	c.attempt(context.Background(), "p")
	cert, ok := st.Defs.Certificate("p")
	if !ok || cert.Status != state.Pending || !strings.Contains(cert.Reason, "internal error: injected") {
		t.Fatalf("after a panic: %+v %v", cert, ok)
	}
	if n := testutil.ToFloat64(c.attempts.WithLabelValues("panic")); n != 1 {
		t.Fatalf("panics counted: %v", n)
	}
	panics = false
	c.attempt(context.Background(), "p")
	if cert, _ := st.Defs.Certificate("p"); cert.Status != state.Reconciled || cert.Total != 0 {
		t.Fatalf("retry: %+v", cert)
	}
}
