package gossip

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// natsLogger takes the embedded NATS server's log: it counts the
// connections the server refused (a stranger without the credential or
// the certificate) and passes warnings and errors on to the node's log.
// The server's notices, debug and trace lines are dropped.
type natsLogger struct {
	log     *slog.Logger
	refused *prometheus.CounterVec // port, reason
	// lastRefusal (unix ms) limits refusals to one log line a second: a
	// stranger knocking in a loop is counted in full, not logged in full.
	lastRefusal *atomic.Int64
	now         func() time.Time
	// fatal, when set, keeps the server's first fatal line (a listener it
	// could not open): the start gives up at once instead of timing out.
	fatal *atomic.Pointer[string]
}

func (l natsLogger) Noticef(string, ...any) {}
func (l natsLogger) Debugf(string, ...any)  {}
func (l natsLogger) Tracef(string, ...any)  {}

func (l natsLogger) Warnf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	if strings.HasPrefix(line, "Plaintext passwords detected") {
		return // derived from the cluster key, in memory only: nothing to fix
	}
	l.log.Warn("nats: " + line)
}

func (l natsLogger) Fatalf(format string, v ...any) {
	// The embedded server never exits the process; its fatal lines are
	// errors of this node like any other.
	line := fmt.Sprintf(format, v...)
	if l.fatal != nil {
		l.fatal.CompareAndSwap(nil, &line)
	}
	l.log.Error("nats: " + line)
}

func (l natsLogger) Errorf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	if reason := refusal(line); reason != "" {
		l.refused.WithLabelValues(natsPort(line), reason).Inc()
		now, last := l.now().UnixMilli(), l.lastRefusal.Load()
		if now-last < 1000 || !l.lastRefusal.CompareAndSwap(last, now) {
			return
		}
		l.log.Warn("nats: refused a connection (see tally_nats_refused_total; at most one line a second)", "line", line)
		return
	}
	l.log.Warn("nats: " + line)
}

// refusal names why the server refused a connection, from its log line
// ("" for any other error): auth (no or a wrong credential) or tls (no
// or an untrusted certificate, or plain text where TLS is required).
func refusal(line string) string {
	switch {
	case strings.Contains(line, "authentication error"), strings.Contains(line, "Authorization Violation"):
		return "auth"
	case strings.Contains(line, "TLS") && strings.Contains(line, "handshake error"):
		return "tls"
	}
	return ""
}

// natsPort tells which of the server's ports a log line is about, from
// the connection id the server prefixes it with (cid: client, rid:
// route, gid: gateway, lid: leaf node).
func natsPort(line string) string {
	switch {
	case strings.Contains(line, " - lid:"), strings.Contains(line, "TLS leafnode"):
		return "leaf"
	case strings.Contains(line, " - rid:"), strings.Contains(line, "TLS route"):
		return "route"
	case strings.Contains(line, " - gid:"), strings.Contains(line, "TLS gateway"):
		return "gateway"
	case strings.Contains(line, " - cid:"), strings.Contains(line, "TLS client"):
		return "client"
	}
	return "other"
}
