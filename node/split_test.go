package node

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// Two nodes with different gossip keys (issue 46: a silent split that
// reported ready on both sides): each logs an error naming --gossip-key,
// counts the messages it could not read or that were refused, and neither
// reports ready — the one that joined has never been answered, the seed
// sees fewer than --expect-members.
func TestAGossipKeyMismatchIsLoudAndNotReady(t *testing.T) {
	logA, logB := &lockedBuffer{}, &lockedBuffer{}
	a := startNode(t, t.TempDir(), func(c *Config) {
		c.Region, c.ExpectMembers = "eu", 2
		c.Logger = slog.New(slog.NewTextHandler(logA, nil))
	})
	b := startNode(t, t.TempDir(), func(c *Config) {
		c.Region, c.Join = "us", []string{a.GossipAddr()}
		c.GossipKey = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=" // another cluster's key
		c.Logger = slog.New(slog.NewTextHandler(logB, nil))
	})
	waitFor(t, func() bool {
		return metricValue(t, []*testNode{a}, "tally_gossip_key_mismatch_total", `direction="received"`) > 0 &&
			metricValue(t, []*testNode{b}, "tally_gossip_key_mismatch_total", `direction="sent"`) > 0
	})
	for _, tc := range []struct {
		n    *testNode
		want []string
	}{{a, []string{"--expect-members", "--gossip-key"}}, {b, []string{"--gossip-key"}}} {
		r := tc.n.call(t, "GET", "/readyz", "")
		for _, w := range tc.want {
			if r.status != http.StatusServiceUnavailable || !strings.Contains(r.raw, w) {
				t.Errorf("/readyz at %s: %d %s, want 503 naming %s", tc.n.replica, r.status, r.raw, w)
			}
		}
	}
	for name, l := range map[string]*lockedBuffer{"the seed": logA, "the joiner": logB} {
		if s := l.String(); !strings.Contains(s, "level=ERROR") || !strings.Contains(s, "--gossip-key") {
			t.Errorf("%s logged no error naming --gossip-key:\n%s", name, s)
		}
	}
	if v := metricValue(t, []*testNode{a}, "tally_ready", ""); v != 0 {
		t.Errorf("tally_ready at the seed = %v, want 0", v)
	}
	if v := metricValue(t, []*testNode{a}, "tally_gossip_expected_members", ""); v != 2 {
		t.Errorf("tally_gossip_expected_members = %v, want 2", v)
	}

	// With the key right, the same joiner is a member and both are ready.
	c := startNode(t, t.TempDir(), func(c *Config) { c.Region, c.Join = "ap", []string{a.GossipAddr()} })
	for _, n := range []*testNode{a, c} {
		waitFor(t, func() bool { return n.call(t, "GET", "/readyz", "").status == http.StatusOK })
	}
}
