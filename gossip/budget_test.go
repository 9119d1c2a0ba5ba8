package gossip

import (
	"testing"
	"time"
)

// TestTokenBudgetCrossesRegions: tokens one region issued to a group reach
// the others, and a member that restarts with empty state learns back the
// counts it had issued from its peers' whole views.
func TestTokenBudgetCrossesRegions(t *testing.T) {
	if testing.Short() {
		t.Skip("a multi-node scenario of seconds: not in the -short inner loop")
	}
	a := startMember(t, "a", "eu", nil, nil)
	b := startMember(t, "b", "us", []string{a.GossipAddr()}, nil)
	waitFor(t, 10*time.Second, "members", func() bool { return len(a.Members()) == 2 && len(b.Members()) == 2 })
	now := time.Now().UnixMilli()
	a.st.Budget.Issue([]uint64{7, 8}, now)
	a.st.Budget.Issue([]uint64{7}, now)
	b.st.Budget.Issue([]uint64{7}, now)
	held := func(m *member, g uint64) uint64 { return m.st.Budget.Within(g, time.Now().UnixMilli(), 60) }
	waitFor(t, 10*time.Second, "counts at both", func() bool {
		return held(a, 7) == 3 && held(b, 7) == 3 && held(a, 8) == 1 && held(b, 8) == 1
	})

	// b restarts: a new process, the same replica, nothing in memory.
	addr := a.GossipAddr()
	b.Close()
	b2 := startMember(t, "b2", "us", []string{addr}, func(c *Config) { c.Replica = "b-r" })
	waitFor(t, 10*time.Second, "counts back at the restarted member", func() bool {
		return held(b2, 7) == 3 && held(b2, 8) == 1
	})
	b2.st.Budget.Issue([]uint64{7}, time.Now().UnixMilli()) // its own count goes on from 1, not from 0
	waitFor(t, 10*time.Second, "the next count", func() bool { return held(a, 7) == 4 && held(b2, 7) == 4 })
}
