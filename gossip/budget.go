package gossip

import (
	"encoding/binary"

	"github.com/nats-io/nats.go"

	"tally/hlc"
	"tally/state"
)

// The token budget's own subject: each node publishes the counts of
// voter tokens it issued per address group per minute when they change
// (state/budget.go), sealed like every message; the others merge them by
// max, so an address's budget holds across the cluster within the NATS
// delay. With NATS down, each node enforces the counts it knows.

const (
	pathBudget     = "budget"
	budgetMagic    = "TB1"
	maxBudgetItems = 1 << 16 // entries in one message
)

// BudgetMessage is one node's changed token counts.
type BudgetMessage struct {
	Replica string
	Sent    hlc.Timestamp
	Entries []state.BudgetEntry
}

// EncodeBudget writes m: the magic, the sender, its clock, then per entry
// the group (8 bytes), the minute and the count as uvarints.
func EncodeBudget(m *BudgetMessage) []byte {
	b := append([]byte(nil), budgetMagic...)
	b = appendString(b, m.Replica)
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
	d := &reader{b: b[len(budgetMagic):]}
	m := &BudgetMessage{Replica: d.id("replica")}
	m.Sent.Replica = m.Replica
	wall, logical := d.uvarint(), d.uvarint()
	if wall > 1<<62 || logical > 1<<32-1 {
		d.fail("clock %d.%d", wall, logical)
	}
	m.Sent.Wall, m.Sent.Logical = int64(wall), uint32(logical)
	n := d.uvarint()
	if d.err == nil && (n > maxBudgetItems || n > uint64(len(d.b))/10) { // an entry is 10 bytes at least
		d.fail("%d budget entries in %d bytes", n, len(d.b))
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		if len(d.b) < 8 {
			d.fail("short budget entry")
			break
		}
		e := state.BudgetEntry{Group: binary.BigEndian.Uint64(d.b)}
		d.b = d.b[8:]
		minute := d.uvarint()
		if minute > 1<<40 {
			d.fail("minute %d", minute)
		}
		e.Minute, e.N = int64(minute), d.uvarint()
		m.Entries = append(m.Entries, e)
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes after the budget entries", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}

func (g *Gossip) budgetSubject() string { return "tally." + g.cfg.Cluster + ".budget" }

// publishBudget sends this node's changed token counts, if any.
func (g *Gossip) publishBudget(nc *nats.Conn) {
	if g.alone() {
		return // kept until someone can hear them
	}
	entries := g.cfg.State.TakeBudget()
	if len(entries) == 0 {
		return
	}
	ts, err := g.cfg.Clock.Now()
	if err != nil {
		return
	}
	for len(entries) > 0 {
		n := min(len(entries), maxBudgetItems)
		b := g.keys.seal(EncodeBudget(&BudgetMessage{Replica: g.cfg.Replica, Sent: ts, Entries: entries[:n]}))
		entries = entries[n:]
		if err := nc.Publish(g.budgetSubject(), b); err != nil {
			g.log.Warn("nats publish of the token budget", "err", err)
			return
		}
		g.m.bytes.WithLabelValues(pathBudget, "out").Add(float64(len(b)))
	}
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
	if m.Replica == g.cfg.Replica {
		return
	}
	if n := g.cfg.State.MergeBudget(m.Replica, m.Entries, g.cfg.Now().UnixMilli()); n > 0 {
		g.m.merges.WithLabelValues(pathBudget).Inc()
	}
}
