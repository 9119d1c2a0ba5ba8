package gossip

import (
	"encoding/binary"
	"time"

	"github.com/nats-io/nats.go"

	"tally/hlc"
	"tally/internal/wire"
	"tally/state"
)

// The token budget's own subject: each node publishes the counts of
// voter tokens it issued per address group per minute when they change
// (state/budget.go), sealed like every message; the others merge them by
// max, so an address's budget holds across the cluster within the NATS
// delay. Every BudgetRefreshEvery a node sends its whole view — every
// replica's counts it knows, its own and relayed — so a delta lost on the
// way (a gateway not up yet) is made good. A node that starts, or whose
// NATS connection comes back, asks for the others' views (a message with
// no entries) every heartbeat for budgetAskFor; each peer answers with its
// view at most once per budgetAnswerEvery. So a restarted node learns back
// what it had issued before it was restarted. Counts only rise, so a
// replayed message changes nothing. With NATS down, each node enforces
// the counts it knows.

const (
	pathBudget     = "budget"
	budgetMagic    = "TB1"
	maxBudgetItems = 1 << 14 // entries in one message (≤ ~400 KB)
)

// BudgetRefreshEvery is how often a full node sends its whole view of the
// token counts.
const BudgetRefreshEvery = 30 * time.Second

const (
	budgetAskFor      = 15 * time.Second // a (re)started node asks for this long
	budgetAnswerEvery = 5 * time.Second  // a peer answers asks at most this often
)

// budgetPub is publishBudget's own bookkeeping (publisher.budget).
type budgetPub struct {
	view     time.Time // last whole view sent
	askUntil time.Time // ask for the peers' views until then
	asked    time.Time // last ask sent
}

// BudgetMessage is the token counts of one replica, as the sender knows
// them: its own changes, or in a refresh any replica's.
type BudgetMessage struct {
	Replica string // whose counts
	Sent    hlc.Timestamp
	Entries []state.BudgetEntry
}

// EncodeBudget writes m: the magic, the sender, its clock, then per entry
// the group (8 bytes), the minute and the count as uvarints.
func EncodeBudget(m *BudgetMessage) []byte {
	b := append([]byte(nil), budgetMagic...)
	b = wire.AppendString(b, m.Replica)
	b = binary.AppendUvarint(b, uint64(max(m.Sent.Wall, 0)))
	b = binary.AppendUvarint(b, uint64(m.Sent.Logical))
	b = binary.AppendUvarint(b, uint64(len(m.Entries)))
	for _, e := range m.Entries {
		b = binary.BigEndian.AppendUint64(b, e.Group)
		b = binary.AppendUvarint(b, uint64(max(e.Minute, 0)))
		b = binary.AppendUvarint(b, e.N)
	}
	return b
}

// DecodeBudget reads a message EncodeBudget wrote, refusing anything
// else (ErrMalformed) without allocating beyond the input's size.
func DecodeBudget(b []byte) (*BudgetMessage, error) {
	if len(b) < len(budgetMagic) || string(b[:len(budgetMagic)]) != budgetMagic {
		return nil, ErrMalformed
	}
	d := wire.NewReader(b[len(budgetMagic):], ErrMalformed)
	m := &BudgetMessage{Replica: readID(d, "replica")}
	m.Sent.Replica = m.Replica
	wall, logical := d.Uvarint(), d.Uvarint()
	if wall > 1<<62 || logical > 1<<32-1 {
		d.Fail("clock %d.%d", wall, logical)
	}
	m.Sent.Wall, m.Sent.Logical = int64(wall), uint32(logical)
	n := d.Uvarint()
	if d.Err() == nil && (n > maxBudgetItems || n > uint64(d.Len())/10) { // an entry is 10 bytes at least
		d.Fail("%d budget entries in %d bytes", n, d.Len())
	}
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		e := state.BudgetEntry{Group: d.Uint64()}
		minute := d.Uvarint()
		if minute > 1<<40 {
			d.Fail("minute %d", minute)
		}
		e.Minute, e.N = int64(minute), d.Uvarint()
		m.Entries = append(m.Entries, e)
	}
	if d.Err() == nil && d.Len() > 0 {
		d.Fail("%d bytes after the budget entries", d.Len())
	}
	if d.Err() != nil {
		return nil, d.Err()
	}
	return m, nil
}

func budgetSubject(g *Gossip) string { return "tally." + g.cfg.Cluster + ".budget" }

// publishBudget sends this node's changed token counts, if any, its whole
// view when a refresh is due or a peer asked for it, and its own ask while
// it is new (mono is the process clock).
func (g *Gossip) publishBudget(nc *nats.Conn, mono time.Time) {
	if g.alone() {
		return // kept until someone can hear them
	}
	ts, err := g.cfg.Clock.Now()
	if err != nil {
		return
	}
	bp := &g.pub.budget
	if bp.askUntil.IsZero() || g.budgetAsk.Swap(false) {
		bp.askUntil = mono.Add(budgetAskFor)
	}
	if mono.Before(bp.askUntil) && mono.Sub(bp.asked) >= g.cfg.HeartbeatEvery {
		bp.asked = mono
		b := g.keys.seal(EncodeBudget(&BudgetMessage{Replica: g.cfg.Replica, Sent: ts}))
		if err := nc.Publish(budgetSubject(g), b); err != nil {
			return
		}
	}
	asked := g.budgetNow.Load() && mono.Sub(bp.view) >= budgetAnswerEvery
	if asked || mono.Sub(bp.view) >= BudgetRefreshEvery {
		g.budgetNow.Store(false)
		bp.view = mono
		g.cfg.State.Budget.Take() // the view holds them
		for replica, entries := range g.cfg.State.Budget.View() {
			if !g.sendBudget(nc, replica, ts, entries) {
				return
			}
		}
		return
	}
	g.sendBudget(nc, g.cfg.Replica, ts, g.cfg.State.Budget.Take())
}

// sendBudget publishes one replica's counts in messages of at most
// maxBudgetItems entries, and reports whether NATS took them all.
func (g *Gossip) sendBudget(nc *nats.Conn, replica string, ts hlc.Timestamp, entries []state.BudgetEntry) bool {
	for len(entries) > 0 {
		n := min(len(entries), maxBudgetItems)
		b := g.keys.seal(EncodeBudget(&BudgetMessage{Replica: replica, Sent: ts, Entries: entries[:n]}))
		entries = entries[n:]
		if err := nc.Publish(budgetSubject(g), b); err != nil {
			g.log.Warn("nats publish of the token budget", "err", err)
			return false
		}
		g.m.bytes.WithLabelValues(pathBudget, "out").Add(float64(len(b)))
	}
	return true
}

// receiveBudget merges another node's token counts.
func (g *Gossip) receiveBudget(b []byte) {
	if g.closed.Load() || g.refuseKeyless(pathBudget, len(b)) {
		return
	}
	g.m.bytes.WithLabelValues(pathBudget, "in").Add(float64(len(b)))
	body, err := g.keys.open(b)
	if err != nil {
		g.m.dropped.WithLabelValues(pathBudget, "unauthenticated").Inc()
		return
	}
	m, err := DecodeBudget(body)
	if err != nil {
		g.m.dropped.WithLabelValues(pathBudget, "malformed").Inc()
		return
	}
	if len(m.Entries) == 0 { // an ask
		if m.Replica != g.cfg.Replica {
			g.budgetNow.Store(true)
		}
		return
	}
	if n := g.cfg.State.Budget.Merge(m.Replica, m.Entries, g.cfg.Now().UnixMilli()); n > 0 {
		g.m.merges.WithLabelValues(pathBudget).Inc()
	}
}
