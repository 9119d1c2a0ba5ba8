package state

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Voter tokens issued per address group, across the cluster (DESIGN
// invariant 11: the limits that guard the count hold across the cluster,
// not per node). Each replica counts the tokens it issued to a group in
// each minute; the counts travel between nodes (gossip's budget subject)
// and merge by max, a G-counter per (group, minute). A group is what the
// caller names it by — ingest hashes an IPv4 address, an IPv6 /64 and /48
// — so state knows nothing of addresses.
//
// Every node also keeps what it heard of the others' counts, and now and
// then sends its whole view (BudgetView): a node that restarted learns its
// own former counts back from its peers (MergeBudget raises its own count
// too), so a restart gives no address a new budget.

// The counts are kept in the Store when it offers PutMetaBatch (the
// ledger does), unsynced: they survive the process being killed, so a
// restart — of one node or of the whole cluster — gives no address a new
// budget. One value per (minute, replica, group), its key sorting by
// minute so the window's end is one range delete.

// budgetStore is what a Store offers to keep the token budget across a
// restart; without it the counts live in memory only.
type budgetStore interface {
	PutMetaBatch(names []string, values [][]byte, sync bool) error
	DeleteMetaRange(from, to string) error
}

const budgetPrefix = "budget/"

// budgetName is the stored name of one replica's count of one group in
// one minute.
func budgetName(minute int64, replica string, group uint64) string {
	return fmt.Sprintf("%s%010x/%s/%016x", budgetPrefix, minute, replica, group)
}

// parseBudget reads a stored count back; ok is false for anything
// budgetName and binary.AppendUvarint did not write.
func parseBudget(name string, value []byte) (minute int64, replica string, group, n uint64, ok bool) {
	rest, found := strings.CutPrefix(name, budgetPrefix)
	parts := strings.Split(rest, "/")
	if !found || len(parts) != 3 || len(parts[0]) != 10 || len(parts[2]) != 16 || parts[1] == "" || len(parts[1]) > 128 {
		return 0, "", 0, 0, false
	}
	m, err1 := strconv.ParseUint(parts[0], 16, 64)
	g, err2 := strconv.ParseUint(parts[2], 16, 64)
	n, size := binary.Uvarint(value)
	if err1 != nil || err2 != nil || size <= 0 || size != len(value) || m > 1<<40 || budgetName(int64(m), parts[1], g) != name {
		return 0, "", 0, 0, false
	}
	return int64(m), parts[1], g, n, true
}

// BudgetMinutes is how many minutes of counts are kept: the longest token
// life (a day), since a token's slot counts the tokens its group holds.
const BudgetMinutes = 24 * 60

// maxBudgetKeys bounds the (group, minute) pairs held; past it, the
// oldest minute is forgotten first.
const maxBudgetKeys = 1 << 20

// BudgetEntry is one replica's count of tokens issued to a group in one
// minute (Unix minutes).
type BudgetEntry struct {
	Group  uint64
	Minute int64
	N      uint64
}

type budgetKey struct {
	group  uint64
	minute int64
}

// budgetCell holds every replica's count of one (group, minute).
type budgetCell struct {
	own    uint64
	others map[string]uint64
}

func (c *budgetCell) sum() uint64 {
	n := c.own
	for _, v := range c.others {
		n += v
	}
	return n
}

// Budgets are the voter tokens issued per address group and minute, this
// replica's and the others' as heard, across the cluster (see the top of
// this file).
type Budgets struct {
	replica string
	mu      sync.Mutex
	m       map[budgetKey]*budgetCell
	dirty   map[budgetKey]struct{} // own counts changed since Take
	swept   int64                  // the minute of the last sweep
	store   budgetStore            // nil: in memory only

	names  []string // the batch being written (mu held)
	values [][]byte
}

// sweep forgets minutes older than the window (called with mu held).
func (b *Budgets) sweep(minute int64) {
	b.swept = minute
	for k := range b.m {
		if k.minute <= minute-BudgetMinutes {
			delete(b.m, k)
			delete(b.dirty, k)
		}
	}
	if b.store != nil {
		// Best effort: what is not deleted now is skipped at load and
		// deleted at the next sweep.
		_ = b.store.DeleteMetaRange(budgetPrefix, fmt.Sprintf("%s%010x", budgetPrefix, minute-BudgetMinutes+1))
	}
}

// keep queues a count for the store (mu held); flush writes the queue.
func (b *Budgets) keep(minute int64, replica string, group, n uint64) {
	if b.store != nil {
		b.names = append(b.names, budgetName(minute, replica, group))
		b.values = append(b.values, binary.AppendUvarint(nil, n))
	}
}

func (b *Budgets) flush() {
	if b.store == nil || len(b.names) == 0 {
		return
	}
	// Best effort, like the sweep: a count not kept is a count a restart
	// forgets, no worse than keeping none; the ledger's own failures
	// surface on the vote path.
	_ = b.store.PutMetaBatch(b.names, b.values, false)
	b.names, b.values = b.names[:0], b.values[:0]
}

// loadBudget reads the kept counts back (New).
func (b *Budgets) load(store Store, nowMs int64) {
	bs, ok := store.(budgetStore)
	if !ok {
		return
	}
	b.store = bs
	minute := nowMs / 60_000
	for name, value := range store.MetaWithPrefix(budgetPrefix) {
		m, replica, group, n, ok := parseBudget(name, value)
		if !ok || m <= minute-BudgetMinutes || m > minute+1 {
			continue
		}
		c := b.cell(budgetKey{group, m}, minute)
		switch {
		case c == nil:
		case replica == b.replica:
			c.own = max(c.own, n)
		default:
			if c.others == nil {
				c.others = make(map[string]uint64)
			}
			if _, known := c.others[replica]; known || len(c.others) < MaxReplicas {
				c.others[replica] = max(c.others[replica], n)
			}
		}
	}
}

func (b *Budgets) cell(k budgetKey, minute int64) *budgetCell {
	if b.m == nil {
		b.m, b.dirty = make(map[budgetKey]*budgetCell), make(map[budgetKey]struct{})
	}
	c := b.m[k]
	if c == nil {
		if len(b.m) >= maxBudgetKeys {
			b.sweep(minute)
			if len(b.m) >= maxBudgetKeys {
				return nil
			}
		}
		c = &budgetCell{}
		b.m[k] = c
	}
	return c
}

// Issue counts one token issued by this replica to each group at
// nowMs.
func (b *Budgets) Issue(groups []uint64, nowMs int64) {
	minute := nowMs / 60_000
	b.mu.Lock()
	defer b.mu.Unlock()
	if minute != b.swept {
		b.sweep(minute)
	}
	for _, g := range groups {
		k := budgetKey{g, minute}
		if c := b.cell(k, minute); c != nil {
			c.own++
			b.dirty[k] = struct{}{}
			b.keep(minute, b.replica, g, c.own)
		}
	}
	b.flush()
}

// Issued returns the tokens issued to group across the cluster in
// each of the last n minutes up to nowMs: counts[0] is the current minute.
func (b *Budgets) Issued(group uint64, nowMs int64, n int) []uint64 {
	minute := nowMs / 60_000
	out := make([]uint64, min(n, BudgetMinutes))
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range out {
		if c := b.m[budgetKey{group, minute - int64(i)}]; c != nil {
			out[i] = c.sum()
		}
	}
	return out
}

// Within returns the tokens issued to group across the cluster in
// the last minutes minutes up to nowMs, the current one included.
func (b *Budgets) Within(group uint64, nowMs int64, minutes int) uint64 {
	minute := nowMs / 60_000
	b.mu.Lock()
	defer b.mu.Unlock()
	var n uint64
	for i := range int64(min(minutes, BudgetMinutes)) {
		if c := b.m[budgetKey{group, minute - i}]; c != nil {
			n += c.sum()
		}
	}
	return n
}

// Take returns this replica's counts changed since the last call
// (for the next gossip message).
func (b *Budgets) Take() []BudgetEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]BudgetEntry, 0, len(b.dirty))
	for k := range b.dirty {
		if c := b.m[k]; c != nil {
			out = append(out, BudgetEntry{Group: k.group, Minute: k.minute, N: c.own})
		}
	}
	clear(b.dirty)
	return out
}

// View returns every count this node knows, its own and the
// others', by replica (for a whole-view refresh).
func (b *Budgets) View() map[string][]BudgetEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string][]BudgetEntry)
	for k, c := range b.m {
		if c.own > 0 {
			out[b.replica] = append(out[b.replica], BudgetEntry{Group: k.group, Minute: k.minute, N: c.own})
		}
		for r, n := range c.others {
			out[r] = append(out[r], BudgetEntry{Group: k.group, Minute: k.minute, N: n})
		}
	}
	return out
}

// Merge takes a replica's counts, as the sender knows them (its own,
// or another's it relays, this node's included: a restarted node learns
// back what it had issued); counts only rise. Minutes outside the window
// (or ahead of nowMs by more than a minute) are ignored. It reports how
// many entries raised a count.
func (b *Budgets) Merge(replica string, entries []BudgetEntry, nowMs int64) int {
	minute := nowMs / 60_000
	b.mu.Lock()
	defer b.mu.Unlock()
	raised := 0
	for _, e := range entries {
		if e.Minute <= minute-BudgetMinutes || e.Minute > minute+1 {
			continue
		}
		c := b.cell(budgetKey{e.Group, e.Minute}, minute)
		switch {
		case c == nil:
			continue
		case replica == b.replica:
			if e.N > c.own {
				c.own = e.N
				raised++
				b.keep(e.Minute, replica, e.Group, e.N)
			}
			continue
		}
		if c.others == nil {
			c.others = make(map[string]uint64)
		}
		if _, ok := c.others[replica]; !ok && len(c.others) >= MaxReplicas {
			continue
		}
		if e.N > c.others[replica] {
			c.others[replica] = e.N
			raised++
			b.keep(e.Minute, replica, e.Group, e.N)
		}
	}
	b.flush()
	return raised
}
