package state

import "sync"

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

type budgets struct {
	mu    sync.Mutex
	m     map[budgetKey]*budgetCell
	dirty map[budgetKey]struct{} // own counts changed since TakeBudget
	swept int64                  // the minute of the last sweep
}

// sweep forgets minutes older than the window (called with mu held).
func (b *budgets) sweep(minute int64) {
	b.swept = minute
	for k := range b.m {
		if k.minute <= minute-BudgetMinutes {
			delete(b.m, k)
			delete(b.dirty, k)
		}
	}
}

func (b *budgets) cell(k budgetKey, minute int64) *budgetCell {
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

// IssueTokens counts one token issued by this replica to each group at
// nowMs.
func (s *State) IssueTokens(groups []uint64, nowMs int64) {
	minute := nowMs / 60_000
	b := &s.budgets
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
		}
	}
}

// TokensIssued returns the tokens issued to group across the cluster in
// each of the last n minutes up to nowMs: counts[0] is the current minute.
func (s *State) TokensIssued(group uint64, nowMs int64, n int) []uint64 {
	minute := nowMs / 60_000
	out := make([]uint64, min(n, BudgetMinutes))
	b := &s.budgets
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range out {
		if c := b.m[budgetKey{group, minute - int64(i)}]; c != nil {
			out[i] = c.sum()
		}
	}
	return out
}

// TokensWithin returns the tokens issued to group across the cluster in
// the last minutes minutes up to nowMs, the current one included.
func (s *State) TokensWithin(group uint64, nowMs int64, minutes int) uint64 {
	minute := nowMs / 60_000
	b := &s.budgets
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

// TakeBudget returns this replica's counts changed since the last call
// (for the next gossip message).
func (s *State) TakeBudget() []BudgetEntry {
	b := &s.budgets
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

// BudgetView returns every count this node knows, its own and the
// others', by replica (for a whole-view refresh).
func (s *State) BudgetView() map[string][]BudgetEntry {
	b := &s.budgets
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string][]BudgetEntry)
	for k, c := range b.m {
		if c.own > 0 {
			out[s.replica] = append(out[s.replica], BudgetEntry{Group: k.group, Minute: k.minute, N: c.own})
		}
		for r, n := range c.others {
			out[r] = append(out[r], BudgetEntry{Group: k.group, Minute: k.minute, N: n})
		}
	}
	return out
}

// MergeBudget takes a replica's counts, as the sender knows them (its own,
// or another's it relays, this node's included: a restarted node learns
// back what it had issued); counts only rise. Minutes outside the window
// (or ahead of nowMs by more than a minute) are ignored. It reports how
// many entries raised a count.
func (s *State) MergeBudget(replica string, entries []BudgetEntry, nowMs int64) int {
	minute := nowMs / 60_000
	b := &s.budgets
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
		case replica == s.replica:
			if e.N > c.own {
				c.own = e.N
				raised++
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
		}
	}
	return raised
}
