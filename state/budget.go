package state

import "sync"

// Voter tokens issued per address group, across the cluster (DESIGN
// invariant 11: the limits that guard the count hold across the cluster,
// not per node). Each replica counts the tokens it issued to a group in
// each minute; the counts travel between nodes (gossip's budget subject)
// and merge by max, a G-counter per (group, minute). A group is what the
// caller names it by — ingest hashes an IPv4 address, an IPv6 /64, /56
// and /48 — so state knows nothing of addresses.

// BudgetMinutes is how many minutes of counts are kept.
const BudgetMinutes = 60

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
}

// sweep forgets minutes older than the window (called with mu held).
func (b *budgets) sweep(minute int64) {
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
	if len(b.m) > 0 && len(b.m)%4096 == 0 {
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

// MergeBudget takes another replica's counts; minutes outside the window
// (or ahead of nowMs by more than a minute) are ignored. It reports how
// many entries raised a count.
func (s *State) MergeBudget(replica string, entries []BudgetEntry, nowMs int64) int {
	if replica == s.replica {
		return 0
	}
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
		if c == nil {
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
