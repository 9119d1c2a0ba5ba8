package node

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"tally/internal/backup"
)

// takeBackup streams GET /v1/backup from the node into a new directory,
// as `tally ledger backup` does, and returns it with its manifest.
func takeBackup(t *testing.T, tn *testNode) (string, backup.Manifest) {
	t.Helper()
	res := adminGet(t, tn.url, "/v1/backup")
	defer res.Body.Close()
	dir := filepath.Join(t.TempDir(), "backup")
	m, err := backup.Extract(res.Body, dir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// TestBackupCarriesTheSessionSecret: a voter token issued before a
// backup is still good at the node restored from it into a fresh data
// dir, where the node made its session secret itself; a node given
// --session-secret leaves it out, and the manifest says the restored
// node needs it again.
func TestBackupCarriesTheSessionSecret(t *testing.T) {
	tokens := func(c *Config) { c.RequireSession, c.PowBits = true, 2 }
	tn := startNode(t, t.TempDir(), tokens)
	tn.createPoll(t, "p")
	token, voter, _ := tn.getToken(t, "phone")
	vote := func(tn *testNode, idem string) response {
		return tn.call(t, "POST", "/v1/polls/p/votes", fmt.Sprintf(`{"option":"a","voter":"x","idem":%q}`, idem), "User-Agent", "phone", "Tally-Session", token)
	}
	if r := vote(tn, "k1"); r.status != http.StatusOK {
		t.Fatalf("a vote with the token: %d %s", r.status, r.raw)
	}
	dir, m := takeBackup(t, tn)
	if m.SessionSecret != backup.SessionSecretInBackup {
		t.Errorf("manifest: session secret %q, want %q", m.SessionSecret, backup.SessionSecretInBackup)
	}
	ms := tn.clock.ms.Load()
	if err := tn.stop(); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "restored")
	if _, err := backup.Restore(dir, data); err != nil {
		t.Fatal(err)
	}
	back := startNodeAt(t, data, ms, tokens)
	if back.replica != tn.replica {
		t.Fatalf("restored as %s, want replica %s", back.replica, tn.replica)
	}
	r := vote(back, "k2")
	if r.status != http.StatusOK {
		t.Fatalf("the token issued before the backup, at the restored node: %d %s", r.status, r.raw)
	}
	if s := result(t, r, 0)["status"]; s != "accepted" {
		t.Fatalf("the token's vote at the restored node: %v", s)
	}
	if got := back.totals(t, "p"); got["a"] != 1 || got["_total"] != 1 {
		t.Fatalf("totals %v: the token's voter %s counts once", got, voter)
	}

	// Given --session-secret, the node keeps it out of its backups.
	given := startNode(t, t.TempDir(), func(c *Config) { tokens(c); c.SessionSecret = "a-configured-secret-0123456789" })
	dir, m = takeBackup(t, given)
	if m.SessionSecret != backup.SessionSecretConfigured {
		t.Errorf("manifest of a node given --session-secret: %q, want %q", m.SessionSecret, backup.SessionSecretConfigured)
	}
	if _, err := os.Stat(filepath.Join(dir, sessionSecretFile)); err == nil {
		t.Error("the backup of a node given --session-secret carries a session secret")
	}
}
