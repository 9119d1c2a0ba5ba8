package certify

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"syscall"
	"time"

	"tally/state"
)

// A member whose process is gone — killed, its machine's disk with it —
// stays a member until memberlist's failure detection declares it dead:
// a few seconds with the local profile, 30 s and more with the wan
// profile's suspicion. Certification need not wait that long to read its
// chain from a copy: a host that answers a connection to the member's
// HTTP port with a refusal (TCP reset: nothing listens on it) says the
// process is gone. A process that is alive but frozen (SIGSTOP, a long
// pause) or cut off still has its listening socket, or cannot be
// reached: its connections hang or time out, never refused. So only
// refusals count, on every look for goneAfter, the last one recent; any
// answer, or a look that fails any other way, ends the streak.
const (
	goneAfter  = time.Second            // refused on every look for this long: gone
	goneFresh  = time.Second            // the last refusal at most this old
	probeEvery = 250 * time.Millisecond // how often the members are looked at while a poll waits for its certificate
	probeWait  = time.Second            // a look that takes longer is no refusal
	// probeFor is how long after a poll's grace its members are still
	// looked at while it waits for its certificate; past it, a member
	// gone is known when memberlist declares it dead.
	probeFor = 2 * time.Minute
)

// members is who certification ranks and reads: the live members
// (Config.Peers) but those gone by their refusals. It keeps, per member
// whose HTTP port refused this node's last connections, since when (on
// this process's monotonic clock).
type members struct {
	self string           // this node's replica: never gone
	list func() []Peer    // Config.Peers
	mono func() time.Time // time.Now but in tests

	mu      sync.Mutex
	streaks map[string]refusalStreak // replica → its refusals since the last answer
}

type refusalStreak struct{ first, last time.Time }

// note records the outcome of a connection to replica's node: err nil (it
// answered) or any error but a refusal ends its streak.
func (m *members) note(replica string, err error) { m.noteAt(replica, err, m.mono()) }

func (m *members) noteAt(replica string, err error, now time.Time) {
	if replica == "" || replica == m.self {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !refused(err) {
		delete(m.streaks, replica)
		return
	}
	if m.streaks == nil {
		m.streaks = map[string]refusalStreak{}
	}
	s, ok := m.streaks[replica]
	if !ok || now.Sub(s.last) > goneFresh {
		s.first = now
	}
	s.last = now
	m.streaks[replica] = s
}

// gone reports whether replica's node has refused every connection for
// goneAfter, the last one at most goneFresh ago.
func (m *members) gone(replica string) bool {
	now := m.mono()
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.streaks[replica]
	return ok && now.Sub(s.first) >= goneAfter && now.Sub(s.last) <= goneFresh
}

// live is the members but those gone.
func (m *members) live() []Peer {
	var out []Peer
	for _, p := range m.list() {
		if !m.gone(p.Replica) {
			out = append(out, p)
		}
	}
	return out
}

// refused reports whether err is a connection refused: the host answered
// and nothing listens on the port.
func refused(err error) bool { return err != nil && errors.Is(err, syscall.ECONNREFUSED) }

// watch looks at every other full member's HTTP port (probe) every
// probeEvery while awaiting says a poll waits for its certificate, so that
// a member whose process is gone is known to be when the poll is due: the
// coordinator order passes over it and its chain is read from a copy.
// One look at a time per member: a frozen one holds up no other.
func (m *members) watch(ctx context.Context, probe func(context.Context, Peer) error, awaiting func() bool) {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	var mu sync.Mutex
	inflight := map[string]bool{} // replica → a look not answered yet
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !awaiting() {
			continue
		}
		for _, p := range m.list() {
			mu.Lock()
			skip := !p.Full || p.Replica == m.self || inflight[p.Replica]
			if !skip {
				inflight[p.Replica] = true
			}
			mu.Unlock()
			if skip {
				continue
			}
			wg.Go(func() {
				pctx, cancel := context.WithTimeout(ctx, probeWait)
				defer cancel()
				err := probe(pctx, p)
				if ctx.Err() == nil {
					m.note(p.Replica, err)
				}
				mu.Lock()
				delete(inflight, p.Replica)
				mu.Unlock()
			})
		}
	}
}

// awaiting reports whether a poll is closed (its grace may still run),
// not yet certified, and its grace ended less than probeFor ago.
func (c *Certifier) awaiting() bool {
	now := c.cfg.Now().UnixMilli()
	for _, d := range c.cfg.State.Defs.Polls() {
		if d.ClosesAt == 0 || now < d.ClosesAt || now > d.GraceEnd()+probeFor.Milliseconds() {
			continue
		}
		if cert, ok := c.cfg.State.Defs.Certificate(d.ID); !ok || cert.Status != state.Reconciled {
			return true
		}
	}
	return false
}

// probeHTTP asks a peer for /readyz: any answer is a live process.
func probeHTTP(ctx context.Context, client *http.Client, p Peer) error {
	if p.HTTPAddr == "" {
		return errors.New("member announces no HTTP address")
	}
	scheme := "http://"
	if p.HTTPS {
		scheme = "https://"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+p.HTTPAddr+"/readyz", nil)
	if err != nil {
		return err
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
	return res.Body.Close()
}
