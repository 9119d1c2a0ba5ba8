package gossip

import (
	"bytes"
	"log"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"
)

// A node whose gossip key differs from its peers' cannot read their
// messages, nor they its: memberlist says so only at debug level, once,
// and both nodes would go on as clusters of one that report ready (issue
// 46). The watch below reads memberlist's log for the decryption failures,
// counts them (tally_gossip_key_mismatch_total), and logs an error naming
// --gossip-key, at most once a keyMismatchLogEvery while it lasts, on the
// node that cannot read and, through its failed join, on the node that
// sent.

// keyMismatchLogEvery bounds the error's repetition.
const keyMismatchLogEvery = 30 * time.Second

// decryptFailure matches memberlist's lines and errors for a message no
// installed key could decrypt.
var decryptFailure = regexp.MustCompile(`(?i)no installed keys could decrypt|decrypt packet failed|failed to decrypt`)

// fromAddr takes the peer's address out of memberlist's log line.
var fromAddr = regexp.MustCompile(`from=(\S+)`)

// keyWatch is the log writer memberlist writes to: every line goes on to
// the node's log at debug level, and a decryption failure is reported.
type keyWatch struct {
	g    *Gossip
	next *log.Logger

	mu       sync.Mutex
	lastLog  time.Time
	lastSeen time.Time // the newest failure (Seen)
	quiet    int       // failures since the last error line
}

// seen reports whether a message of another key was met within the last
// minute.
func (w *keyWatch) seen() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.lastSeen.IsZero() && time.Since(w.lastSeen) < time.Minute
}

func newKeyWatch(g *Gossip) *keyWatch {
	return &keyWatch{g: g, next: slog.NewLogLogger(g.log.Handler(), slog.LevelDebug)}
}

func (w *keyWatch) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, "\n"))
	w.next.Print(line)
	if decryptFailure.MatchString(line) {
		peer := ""
		if m := fromAddr.FindStringSubmatch(line); m != nil {
			peer = m[1]
		}
		w.mismatch(peer, "received")
	}
	return len(p), nil
}

// mismatch counts one message that the keys of this node and peer do not
// share, and logs the error when it may.
func (w *keyWatch) mismatch(peer, dir string) {
	w.g.m.keyMismatch.WithLabelValues(dir).Inc()
	w.mu.Lock()
	now := time.Now()
	w.lastSeen = now
	if !w.lastLog.IsZero() && now.Sub(w.lastLog) < keyMismatchLogEvery {
		w.quiet++
		w.mu.Unlock()
		return
	}
	suppressed := w.quiet
	w.lastLog, w.quiet = now, 0
	w.mu.Unlock()
	msg := "gossip: a node sends messages this node's --gossip-key cannot read: every node of a cluster needs the same key (the other node is not a member of this cluster until it has it)"
	if dir == "sent" {
		msg = "gossip: a seed cannot read this node's messages: its --gossip-key is not this node's (this node is not a member of the cluster until the keys match)"
	}
	w.g.log.Error(msg, "peer", peer, "flag", "--gossip-key", "suppressed", suppressed)
}

// joinFailed reports a failed join: a seed that could not decrypt it
// answers so, and that is a key mismatch on this side.
func (w *keyWatch) joinFailed(seeds []string, err error) bool {
	if err == nil || !decryptFailure.MatchString(err.Error()) {
		return false
	}
	w.mismatch(strings.Join(seeds, ","), "sent")
	return true
}
