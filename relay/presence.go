package relay

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"tally/internal/wire"
)

// Every full node says, every PresenceEvery, on its cluster's
// PresenceSubject, that it is there and whether it takes votes (Ready:
// replayed, caught up with the other replicas' ballots, not draining).
// An edge relays only to the full nodes it heard ready within its
// EdgeConfig.Stale: a full node that froze, died or is still catching up
// gets no batch (it would answer none, or 503), and one that is back and
// ready gets them again within a beat. An edge that hears no full node
// at all (a cluster of the release before, or its own NATS link down)
// relays by the membership alone, as before.
const PresenceEvery = 250 * time.Millisecond

// PresenceSubject is where a cluster's full nodes announce themselves.
func PresenceSubject(cluster string) string { return "tally." + cluster + ".presence" }

const (
	presenceMagic = "TRP1"
	maxName       = 255 // a replica id or a region in a presence message
)

// presence is one full node's word: who it is, of which region, and
// whether it takes votes now.
type presence struct {
	Replica, Region string
	Ready           bool
}

func appendPresence(b []byte, p presence) []byte {
	b = append(b, presenceMagic...)
	ready := byte(0)
	if p.Ready {
		ready = 1
	}
	b = append(b, ready)
	b = wire.AppendString(b, p.Replica)
	return wire.AppendString(b, p.Region)
}

// decodePresence reads a presence message, refusing one that is damaged
// or over its bounds.
func decodePresence(b []byte) (presence, error) {
	if len(b) < len(presenceMagic) || string(b[:len(presenceMagic)]) != presenceMagic {
		return presence{}, fmt.Errorf("%w: not a presence message", ErrMalformed)
	}
	r := wire.NewReader(b[len(presenceMagic):], ErrMalformed)
	var p presence
	switch r.Byte() {
	case 0:
	case 1:
		p.Ready = true
	default:
		r.Fail("ready flag")
	}
	p.Replica = r.String(maxName, "replica")
	p.Region = r.String(maxName, "region")
	switch {
	case r.Err() != nil:
		return presence{}, r.Err()
	case p.Replica == "":
		return presence{}, fmt.Errorf("%w: presence without a replica", ErrMalformed)
	case r.Len() != 0:
		return presence{}, fmt.Errorf("%w: %d bytes after the presence", ErrMalformed, r.Len())
	}
	return p, nil
}

// announce says the node's presence every PresenceEvery until stop is
// closed, and keeps the node in the shared queue group only while it is
// ready: NATS then hands no batch of the shared subject to a node that
// would answer 503.
func (s *Server) announce(stop <-chan struct{}) {
	t := time.NewTicker(s.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ready := s.cfg.Ready()
		s.share(ready)
		s.say(ready)
	}
}

// say publishes the node's presence.
func (s *Server) say(ready bool) {
	p := presence{Replica: s.cfg.Replica, Region: s.cfg.Region, Ready: ready}
	// Disconnected, the client buffers it or refuses it: either way the
	// next beat says it again.
	_ = s.cfg.Conn.Publish(PresenceSubject(s.cfg.Cluster), s.cfg.Seal(appendPresence(nil, p)))
}

// share joins the shared queue group when ready and leaves it when not.
func (s *Server) share(ready bool) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	switch {
	case ready && s.shared == nil && !s.closing:
		sub, err := s.cfg.Conn.QueueSubscribe(Subject(s.cfg.Cluster), queueGroup, s.receive)
		if err != nil {
			s.cfg.Logger.Warn("relay: cannot join the full nodes' queue group", "err", err)
			return
		}
		s.shared = sub
	case !ready && s.shared != nil:
		if err := s.shared.Unsubscribe(); err != nil {
			s.cfg.Logger.Warn("relay: cannot leave the full nodes' queue group", "err", err)
		}
		s.shared = nil
	}
}

// heardFrom is a full node's last word as an edge heard it.
type heardFrom struct {
	region string
	ready  bool
	at     time.Time
}

// roster is what an edge heard from the full nodes.
type roster struct {
	mu   sync.Mutex
	seen map[string]heardFrom // replica → its last word
	last time.Time            // the last word from anyone
}

// hear takes a presence message.
func (e *Edge) hear(m *nats.Msg) {
	body, err := e.cfg.Open(m.Data)
	if err != nil {
		return
	}
	p, err := decodePresence(body)
	if err != nil {
		if ok, n := e.badLog.allow(time.Now()); ok {
			e.cfg.Logger.Warn("relay: a presence message that does not decode, not believed", "err", err, "suppressed", n)
		}
		return
	}
	now := time.Now()
	r := &e.roster
	r.mu.Lock()
	if r.seen == nil {
		r.seen = map[string]heardFrom{}
	}
	was, known := r.seen[p.Replica]
	changed := !known || was.ready != p.Ready || e.silent(r, was, now)
	r.seen[p.Replica] = heardFrom{region: p.Region, ready: p.Ready, at: now}
	r.last = now
	r.mu.Unlock()
	if changed {
		select {
		case e.heardNew <- struct{}{}:
		default:
		}
	}
}

// silent reports whether h, a full node's last word, is too old: the
// edge has not heard it for Stale while it heard others for half that
// since. When every full node falls silent together, none of them is:
// the link they are all heard over is what stopped (Silent), and there
// is nowhere else to relay to until it is back. The roster's lock is
// held.
func (e *Edge) silent(r *roster, h heardFrom, now time.Time) bool {
	return now.Sub(h.at) >= e.cfg.Stale && r.last.Sub(h.at) >= e.cfg.Stale/2
}

// Silent is how long the edge has heard no full node at all: zero until
// it heard one. Everything an edge relays goes over one NATS link (a
// leaf connection to one full node); when every full node falls silent
// together, that link is what stopped.
func (e *Edge) Silent() time.Duration {
	e.roster.mu.Lock()
	defer e.roster.mu.Unlock()
	if e.roster.last.IsZero() {
		return 0
	}
	return time.Since(e.roster.last)
}

// candidates are the full nodes a request may go to: of the membership
// (FullNodes), those heard ready within Stale, its region's then the
// others'. When it heard none of them ready lately — a cluster whose full
// nodes announce nothing, or an edge that hears nobody now — they are the
// membership's, as listed, but for those whose last word was that they
// are not ready (heard is false).
func (e *Edge) candidates() (region, others []string, heard bool) {
	if e.cfg.FullNodes == nil {
		return nil, nil, false
	}
	region, others = e.cfg.FullNodes()
	now := time.Now()
	r := &e.roster
	r.mu.Lock()
	defer r.mu.Unlock()
	keep := func(replicas []string, ok func(h heardFrom, heard bool) bool) []string {
		var out []string
		for _, id := range replicas {
			if h, heard := r.seen[id]; ok(h, heard) {
				out = append(out, id)
			}
		}
		return out
	}
	ready := func(h heardFrom, heard bool) bool { return heard && h.ready && !e.silent(r, h, now) }
	if rr, ro := keep(region, ready), keep(others, ready); len(rr)+len(ro) > 0 {
		return rr, ro, true
	}
	notSaidNo := func(h heardFrom, heard bool) bool { return !heard || h.ready }
	if rr, ro := keep(region, notSaidNo), keep(others, notSaidNo); len(rr)+len(ro) > 0 {
		return rr, ro, false
	}
	return region, others, false
}

// Target is a full node an edge relays to.
type Target struct {
	Replica string
	// Region is the one it announced; "" for a node the edge has not
	// heard from (it relays by the membership alone).
	Region string
}

// retargeted returns a channel closed when the targets next change, or
// the NATS connection reconnected (its link moved).
func (e *Edge) retargeted() <-chan struct{} {
	e.targetMu.Lock()
	defer e.targetMu.Unlock()
	return e.changed
}

// LinkMoved tells the edge that its NATS link moved (its connection
// reconnected, or the server it is a client of has a leaf connection to
// another full node): what went out on the old one is lost, and the
// batches waiting on it are sent again at once.
func (e *Edge) LinkMoved() {
	e.link.Add(1)
	e.targetMu.Lock()
	defer e.targetMu.Unlock()
	e.nudgeLocked()
}

// nudgeLocked wakes the batches waiting on an attempt (retargeted). The
// targets' lock is held.
func (e *Edge) nudgeLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// Targets are the full nodes the edge relays to now: its region's that it
// heard ready lately, else the other regions' (each request goes to the
// one its voter ranks first; the rest of the list is its failover order).
// Empty when it knows of no full node: then the shared queue group.
func (e *Edge) Targets() []Target {
	e.targetMu.Lock()
	defer e.targetMu.Unlock()
	return slices.Clone(e.targets)
}

// retarget works out the targets again and, when they changed, says so in
// the log and in tally_relay_target.
func (e *Edge) retarget() {
	region, others, heard := e.candidates()
	ids := slices.Clone(region)
	if len(ids) == 0 {
		ids = slices.Clone(others)
	}
	slices.Sort(ids)
	var region0, others0 []string // the membership's
	if e.cfg.FullNodes != nil {
		region0, others0 = e.cfg.FullNodes()
	}
	now := time.Now()
	e.roster.mu.Lock()
	cur := make([]Target, 0, len(ids))
	for _, id := range ids {
		cur = append(cur, Target{Replica: id, Region: e.roster.seen[id].region})
	}
	// Why the ones dropped were: gone, silent, not ready, or behind the
	// edge's own region's (back).
	var why []string
	for _, t := range e.targets {
		if slices.Contains(ids, t.Replica) {
			continue
		}
		h, ok := e.roster.seen[t.Replica]
		switch {
		case !slices.Contains(region0, t.Replica) && !slices.Contains(others0, t.Replica):
			why = append(why, t.Replica+" left the membership")
		case !ok:
			why = append(why, t.Replica+" unheard")
		case e.silent(&e.roster, h, now):
			why = append(why, fmt.Sprintf("%s silent for %s", t.Replica, now.Sub(h.at).Round(time.Millisecond)))
		case !h.ready:
			why = append(why, t.Replica+" not ready")
		default:
			why = append(why, t.Replica+" behind the edge's region's")
		}
	}
	e.pruneRoster(now)
	e.roster.mu.Unlock()

	e.targetMu.Lock()
	defer e.targetMu.Unlock()
	if slices.Equal(cur, e.targets) {
		return
	}
	was := e.targets
	e.targets = cur
	e.nudgeLocked() // the batches waiting on a node dropped go on at once
	e.cfg.Metrics.target(was, cur)
	msg := "relay: relaying to " + describe(cur) + ", was " + describe(was)
	attrs := []any{"heard", heard}
	if len(why) > 0 {
		attrs = append(attrs, "why", strings.Join(why, "; "))
	}
	if len(cur) == 0 {
		e.cfg.Logger.Warn(msg, attrs...)
		return
	}
	e.cfg.Logger.Info(msg, attrs...)
}

// pruneRoster forgets the full nodes unheard for a minute (gone, or
// replaced under another replica id). The roster's lock is held.
func (e *Edge) pruneRoster(now time.Time) {
	for id, h := range e.roster.seen {
		if now.Sub(h.at) > time.Minute {
			delete(e.roster.seen, id)
		}
	}
}

// describe is targets for a log line: "eu-west-1a2b (region eu-west)".
func describe(ts []Target) string {
	if len(ts) == 0 {
		return "no full node"
	}
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.Replica + " (region " + cmp.Or(t.Region, "unheard") + ")"
	}
	return strings.Join(parts, ", ")
}

// watch keeps the edge's presence subscription and its targets until
// ctx ends.
func (e *Edge) watch(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var (
		sub        *nats.Subscription
		on         *nats.Conn
		reconnects uint64
	)
	defer func() {
		if sub != nil {
			sub.Unsubscribe()
		}
	}()
	for {
		if nc := e.cfg.Conn(); nc != nil && nc != on {
			if sub != nil {
				sub.Unsubscribe()
			}
			s, err := nc.Subscribe(PresenceSubject(e.cfg.Cluster), e.hear)
			if err != nil {
				e.cfg.Logger.Warn("relay: cannot listen for the full nodes' presence", "err", err)
			} else {
				sub, on, reconnects = s, nc, nc.Stats().Reconnects
			}
		}
		if on != nil {
			if r := on.Stats().Reconnects; r != reconnects {
				reconnects = r
				e.LinkMoved()
			}
		}
		e.retarget()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.heardNew:
		}
	}
}
