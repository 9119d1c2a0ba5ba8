package node

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
)

// A node that joins with another --gossip-key is refused: its log names
// the seed that refused it and, when it takes votes past --catch-up-wait,
// says it joined nobody because of the key, not that some replicas'
// ballots are missing (unheard=[]).
func TestAWrongKeyJoinerSaysItJoinedNobody(t *testing.T) {
	a := startNode(t, t.TempDir(), func(c *Config) { c.Region = "eu" })
	log := &lockedBuffer{}
	b := startNode(t, t.TempDir(), func(c *Config) {
		c.Region, c.Join = "us", []string{a.GossipAddr()}
		c.GossipKey = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=" // another cluster's key
		c.Logger = slog.New(slog.NewTextHandler(log, nil))
	})
	seed := a.GossipAddr()
	want := []string{
		`level=ERROR msg="gossip: a seed cannot read this node's messages: its --gossip-key is not this node's (this node is not a member of the cluster until the keys match)" component=gossip peer=` + seed + ` flag=--gossip-key suppressed=0`,
		`level=WARN msg="not caught up with the other replicas' ballots: joined no cluster member, a node it tried to join refused this node's --gossip-key (see the gossip key error above); taking votes alone (a retry of a key taken elsewhere may get a new vote id; certification names any replica it cannot read)" waited=`,
		` flag=--gossip-key seeds=` + seed + "\n",
	}
	waitFor(t, func() bool { return containsAll(log.String(), want) })
	if s := log.String(); strings.Contains(s, `peer=""`) || strings.Contains(s, "unheard=") {
		t.Errorf("the joiner's log names no peer or blames missing ballots:\n%s", s)
	}
	if v := metricValue(t, []*testNode{b}, "tally_catch_up_timeouts_total", ""); v != 1 {
		t.Errorf("tally_catch_up_timeouts_total = %v, want 1", v)
	}
}

// A node whose seeds do not answer says so when it takes votes alone.
func TestASeedlessJoinerSaysItJoinedNobody(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seed := l.Addr().String()
	l.Close() // nobody answers there
	log := &lockedBuffer{}
	b := startNode(t, t.TempDir(), func(c *Config) {
		c.Region, c.Join = "us", []string{seed}
		c.Logger = slog.New(slog.NewTextHandler(log, nil))
	})
	want := []string{
		`level=WARN msg="not caught up with the other replicas' ballots: joined no cluster member, no --join seed answered (down, unreachable, or not started yet); taking votes alone (a retry of a key taken elsewhere may get a new vote id; certification names any replica it cannot read)" waited=`,
		` flag=--join seeds=` + seed + "\n",
	}
	waitFor(t, func() bool { return containsAll(log.String(), want) })
	if s := log.String(); strings.Contains(s, "--gossip-key") || strings.Contains(s, "unheard=") {
		t.Errorf("the joiner's log blames the key or missing ballots:\n%s", s)
	}
	if v := metricValue(t, []*testNode{b}, "tally_catch_up_timeouts_total", ""); v != 1 {
		t.Errorf("tally_catch_up_timeouts_total = %v, want 1", v)
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestNotCaughtUpSaysWhatIsMissing: the warning of each case, alone or
// joined.
func TestNotCaughtUpSaysWhatIsMissing(t *testing.T) {
	for _, tc := range []struct {
		v    catchUpView
		msg  string
		args string
	}{
		{catchUpView{refused: true, seeds: "s:1,t:2"}, ": joined no cluster member, a node it tried to join refused this node's --gossip-key", "[flag --gossip-key seeds s:1,t:2]"},
		{catchUpView{refused: true, joined: true, unheard: []string{"eu-1"}}, ": joined no cluster member, a node it tried to join refused this node's --gossip-key", "[flag --gossip-key seeds ]"},
		{catchUpView{seeds: "s:1"}, ": joined no cluster member, no --join seed answered", "[flag --join seeds s:1]"},
		{catchUpView{joined: true, unheard: []string{"eu-1"}}, ": no other cluster member is alive; taking votes alone", "[flag --catch-up-wait seeds ]"},
		{catchUpView{others: 1, joined: true, refused: true, unheard: []string{"eu-1"}}, "; taking votes anyway", "[flag --catch-up-wait synced false unheard [eu-1]]"},
		{catchUpView{others: 2, joined: true}, ": joined the cluster but merged no member's full state yet", "[flag --catch-up-wait members 3]"},
		{catchUpView{others: 2, joined: true, synced: true}, ": heard from every replica but, at the last look, held fewer of their ballots", "[flag --catch-up-wait members 3]"},
	} {
		msg, args := notCaughtUp(tc.v)
		if !strings.HasPrefix(msg, notCaughtUpMsg+tc.msg) || !strings.HasSuffix(msg, takesAnyway) || fmt.Sprint(args) != tc.args {
			t.Errorf("%+v: %q %v; want %q… %s", tc.v, msg, args, tc.msg, tc.args)
		}
	}
}
