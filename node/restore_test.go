package node

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"tally/internal/backup"
)

// TestRestoreNeverLowersTheLiveTally: a region restored from a backup
// older than its last votes (two of them, one a change of mind) does not
// pull the number on air down, at the others or at itself (issue 26, item
// 3: it went from 7 to 6).
func TestRestoreNeverLowersTheLiveTally(t *testing.T) {
	nodes := startCluster(t, []string{"eu", "us"}, nil)
	eu, us := nodes[0], nodes[1]
	if r := eu.admin(t, "POST", "/v1/polls", `{"id":"lost2","question":"?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":600}`); r.status != http.StatusCreated {
		t.Fatal(r.raw)
	}
	havePoll(t, nodes, "lost2")
	for i := range 3 {
		eu.castVote(t, "lost2", "a", fmt.Sprint("e", i), fmt.Sprint("ke", i))
		us.castVote(t, "lost2", "b", fmt.Sprint("u", i), fmt.Sprint("ku", i))
	}
	waitFor(t, func() bool { return eu.totals(t, "lost2")["_total"] == 6 })
	// Back up us.
	req, _ := http.NewRequest("GET", us.url+"/v1/backup", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := us.client.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("backup: %v %v", res, err)
	}
	bdir := filepath.Join(t.TempDir(), "backup")
	if _, err := backup.Extract(res.Body, bdir, 1<<30); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	us.castVote(t, "lost2", "b", "u9", "ku9")
	us.castVote(t, "lost2", "a", "u0", "ku0-again") // a change of mind after the backup
	waitFor(t, func() bool { return eu.totals(t, "lost2")["_total"] == 7 })
	before := eu.totals(t, "lost2")
	ms := us.clock.ms.Load()
	if err := us.stop(); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "restored")
	if _, err := backup.Restore(bdir, data); err != nil {
		t.Fatal(err)
	}
	restored := startNodeAt(t, data, ms, func(c *Config) {
		c.Region, c.Join, c.PushPull = "us", eu.GossipAddr(), 500*time.Millisecond
	})
	waitFor(t, func() bool { return len(restored.gossip.Members()) == 2 })
	// Once both regions show the same tally, it is the one before the
	// restore: the higher entries stand.
	waitFor(t, func() bool {
		return fmt.Sprint(eu.totals(t, "lost2")) == fmt.Sprint(restored.totals(t, "lost2"))
	})
	if got := eu.totals(t, "lost2"); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("the tally on air went from %v to %v after the restore", before, got)
	}
	t.Logf("eu %v, restored us %v", eu.totals(t, "lost2"), restored.totals(t, "lost2"))
}
