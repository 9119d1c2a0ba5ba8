package node

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tally/api"
	"tally/internal/backup"
	"tally/internal/testwait"
	"tally/ledger"
)

// restoreCluster is the issue 59 report's cluster, in process: full nodes
// a and b in eu (each the other's buddy), c in us, every one on two
// copies, counting every vote (the tests keep a model of the result).
func restoreCluster(t *testing.T) (a, b, c *testNode) {
	t.Helper()
	nodes := startCluster(t, []string{"eu", "eu", "us"}, func(_ int, c *Config) {
		c.AckCopies, c.TrustFloor = 2, 0
		c.Limits.IPRate, c.Limits.VoterRate = 0, 0
	})
	return nodes[0], nodes[1], nodes[2]
}

// restoreInto puts a backup into a new data dir as `tally ledger restore`
// does: its files, and its ledger marked restored (restoreMark).
func restoreInto(t *testing.T, from string, m backup.Manifest) string {
	t.Helper()
	data := filepath.Join(t.TempDir(), "restored")
	if _, err := backup.Restore(from, data); err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(ledger.Config{Dir: filepath.Join(data, ledgerDir), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mark, _ := json.Marshal(restoreMarkValue{BackupTakenAt: m.CreatedAt, RestoredAt: time.Now().UnixMilli()})
	if err := l.PutMeta(restoreMark, mark); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return data
}

// startUnready is startNodeAt without waiting for the node to turn ready.
func startUnready(t *testing.T, dir string, ms int64, mutate func(*Config)) *testNode {
	t.Helper()
	clock := &fakeClock{}
	clock.ms.Store(ms)
	cfg := testConfig(dir, clock)
	mutate(&cfg)
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(context.Background()) }()
	tn := &testNode{Node: n, url: n.scheme() + "://" + n.Addr(), client: http.DefaultClient, clock: clock}
	var once atomic.Bool
	tn.stop = func() error {
		if !once.CompareAndSwap(false, true) {
			return nil
		}
		err := n.Close(context.Background())
		<-done
		return err
	}
	t.Cleanup(func() {
		if err := tn.stop(); err != nil {
			t.Error(err)
		}
	})
	return tn
}

// voteAcked sends a vote until it is acknowledged, as clients do: a
// refusal that asks for a retry (503 no_copy while the buddies' NATS
// subjects reach across the regions, 504 outcome_unknown) is sent again
// with the same key. It returns the vote id and its stamp.
func voteAcked(t *testing.T, n *testNode, poll, body string) (id, stamp string) {
	t.Helper()
	// 30 s: beside two busy loops and a nine-process cluster, one vote has
	// waited out 10 s of 503s (its copy to the buddy timing out).
	testwait.For(t, 30*time.Second, "vote "+body+" acknowledged at "+n.replica, func() bool {
		r := n.call(t, "POST", "/v1/polls/"+poll+"/votes", body)
		switch {
		case r.status == http.StatusServiceUnavailable || r.status == http.StatusGatewayTimeout:
			return false
		case r.status != http.StatusOK:
			t.Fatalf("vote %s at %s: %d %s", body, n.replica, r.status, r.raw)
		}
		res := r.body["results"].([]any)[0].(map[string]any)
		if s := res["status"]; s != "accepted" && s != "duplicate" {
			t.Fatalf("vote %s at %s: %v", body, n.replica, res)
		}
		id, stamp = res["vote_id"].(string), res["stamp"].(string)
		return true
	})
	return id, stamp
}

// totalsWatch reads a poll's live total at some nodes every few
// milliseconds, from the first time each answers, and keeps every fall.
type totalsWatch struct {
	poll  string
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	urls  []string
	first map[string]int64 // the first total each showed
	seen  map[string]int64 // the highest
	fell  []string
}

func watchTotals(poll string, nodes ...*testNode) *totalsWatch {
	w := &totalsWatch{poll: poll, stop: make(chan struct{}), first: map[string]int64{}, seen: map[string]int64{}}
	for _, n := range nodes {
		w.add(n)
	}
	w.wg.Go(func() {
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(5 * time.Millisecond): // the sampling rate, not a wait for a condition
			}
			w.mu.Lock()
			urls := w.urls
			w.mu.Unlock()
			for _, u := range urls {
				w.read(u)
			}
		}
	})
	return w
}

// add watches one more node, from its first answer on.
func (w *totalsWatch) add(n *testNode) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.urls = append(w.urls, n.url)
}

func (w *totalsWatch) read(u string) {
	var v api.PollView
	if getJSON(u+"/v1/polls/"+w.poll, &v) != http.StatusOK || v.Total == nil {
		return // not answering yet (a restored node before it is whole)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	seen, ok := w.seen[u]
	switch {
	case !ok:
		w.first[u] = *v.Total
	case *v.Total < seen:
		w.fell = append(w.fell, fmt.Sprintf("%s: %d after %d", u, *v.Total, seen))
	}
	w.seen[u] = max(seen, *v.Total)
}

// firstOf returns the first total n showed, once it showed one.
func (w *totalsWatch) firstOf(n *testNode) (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.first[n.url]
	return v, ok
}

// done stops watching and returns the falls seen.
func (w *totalsWatch) done() (fell []string) {
	close(w.stop)
	w.wg.Wait()
	return w.fell
}

// TestRestoreCompletesFromTheBuddysCopy is issue 59's report: a node
// restored from a backup taken mid-way is completed, before it turns
// ready, from its buddy's copy of the votes it acknowledged after the
// backup. It ends whole (its own export holds every record it
// acknowledged, and it goes on appending to the same chain, which its
// buddy's copy continues), the live total at every node never falls
// from the moment the restored node starts (at the restored node: from
// its first answer), and the poll certifies every acknowledged vote with
// no --accept-lost (there is nothing to accept). It logs how long the
// completion took.
func TestRestoreCompletesFromTheBuddysCopy(t *testing.T) {
	t.Parallel()
	a, b, c := restoreCluster(t)
	if r := c.admin(t, "POST", "/v1/polls", `{"id":"whole","question":"?","options":[{"id":"x","label":"X"},{"id":"y","label":"Y"},{"id":"z","label":"Z"}],"duration_s":600}`); r.status != http.StatusCreated {
		t.Fatal(r.raw)
	}
	nodes := []*testNode{a, b, c}
	havePoll(t, nodes, "whole")
	options := []string{"x", "y", "z"}
	final := map[string]string{}  // voter → the option that counts
	stamps := map[string]string{} // voter → the stamp of their last vote, sent back with the next
	sent := map[string]string{}   // idem → the vote sent with it
	ids := map[string]string{}    // idem → the vote id answered
	cast := func(n *testNode, voter, option, idem string) {
		sent[idem] = fmt.Sprintf(`{"option":%q,"voter":%q,"idem":%q}`, option, voter, idem)
		if after := stamps[voter]; after != "" {
			sent[idem] = fmt.Sprintf(`{"option":%q,"voter":%q,"idem":%q,"after":%q}`, option, voter, idem, after)
		}
		final[voter] = option
		ids[idem], stamps[voter] = voteAcked(t, n, "whole", sent[idem])
	}
	const half = 150 // a's records before the backup, and after it
	for i := range half {
		cast(a, fmt.Sprint("a", i), options[i%3], fmt.Sprint("ka", i))
		cast(c, fmt.Sprint("c", i), options[i%3], fmt.Sprint("kc", i))
	}
	bdir, m := takeBackup(t, a)
	// After the backup, a takes as many again: new voters, changes of
	// mind of voters whose first vote the backup holds, and of c's voters;
	// c takes new voters, and changes of mind of voters a took after the
	// backup (each vote sends back the stamp of the voter's last).
	for i := half; i < 2*half-20; i++ {
		cast(a, fmt.Sprint("a", i), options[i%3], fmt.Sprint("ka", i))
		cast(c, fmt.Sprint("c", i), options[i%3], fmt.Sprint("kc", i))
	}
	for i := range 10 {
		cast(a, fmt.Sprint("a", i), options[(i+1)%3], fmt.Sprint("ka-again", i))
		cast(a, fmt.Sprint("c", i), options[(i+2)%3], fmt.Sprint("kc-to-a", i))
		cast(c, fmt.Sprint("a", half+i), options[(i+1)%3], fmt.Sprint("ka-to-c", half+i))
	}
	want := map[string]int64{"_total": int64(len(final))}
	for _, o := range final {
		want[o]++
	}
	agreeOn := func(nodes ...*testNode) {
		t.Helper()
		waitFor(t, func() bool {
			for _, n := range nodes {
				if fmt.Sprint(n.totals(t, "whole")) != fmt.Sprint(want) {
					return false
				}
			}
			return true
		})
	}
	agreeOn(a, b, c)
	// Every record a acknowledged is on its buddy, b, with a's signed
	// head — or, where a copy to b went unanswered for a second (a
	// starved CI run), on c, which a then copied its whole chain to: the
	// restore asks every full member and takes the longest.
	heldB, errB := b.copies.store.Head("whole", a.replica)
	heldC, errC := c.copies.store.Head("whole", a.replica)
	if max(heldB, heldC) != 2*half {
		t.Fatalf("a's chain: %d records on b (%v), %d on c (%v), want %d on one of them", heldB, errB, heldC, errC, 2*half)
	}

	// a is destroyed; its backup is restored and started, watched.
	ms := a.clock.ms.Load()
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	data := restoreInto(t, bdir, m)
	watch := watchTotals("whole", b, c)
	start := time.Now()
	restored := startUnready(t, data, ms, func(cfg *Config) {
		cfg.Region, cfg.Join, cfg.PushPull = "eu", []string{b.GossipAddr()}, 500*time.Millisecond
		cfg.AckCopies, cfg.TrustFloor, cfg.Limits.IPRate, cfg.Limits.VoterRate = 2, 0, 0, 0
	})
	watch.add(restored)
	waitFor(t, func() bool { return restored.ready.Load() })
	t.Logf("the restored node completed %d records from its buddy's copy and turned ready %v after its start",
		2*half-half, time.Since(start).Round(time.Millisecond))
	nodes = []*testNode{restored, b, c}
	agreeOn(nodes...)
	waitFor(t, func() bool { _, ok := watch.firstOf(restored); return ok })
	if first, _ := watch.firstOf(restored); first != want["_total"] {
		t.Fatalf("the restored node's first answer showed %d, want %d", first, want["_total"])
	}
	if fell := watch.done(); len(fell) > 0 {
		t.Fatalf("the number on air fell after the restore: %v", fell)
	}

	// Whole: the restored node's chain and export hold every record, and a
	// retry of a vote it took after the backup gets its vote id there.
	if held, _, err := restored.ledger.Head("whole", restored.replica); err != nil || held != 2*half {
		t.Fatalf("the restored chain holds %d records (%v), want %d", held, err, 2*half)
	}
	if mark, err := readRestoreMark(restored.ledger); err != nil || mark == nil || !mark.Whole || mark.Completed != half {
		t.Fatalf("restore mark %+v (%v), want whole, %d completed", mark, err, half)
	}
	for _, idem := range []string{"ka3", "ka200", "ka-again7"} {
		if res := result(t, restored.call(t, "POST", "/v1/polls/whole/votes", sent[idem]), 0); res["status"] != "duplicate" || res["vote_id"] != ids[idem] {
			t.Fatalf("retry of %s at the restored node: %v, want duplicate %s", idem, res, ids[idem])
		}
	}
	// It takes new votes, continuing the chain its buddy holds.
	cast(restored, "late", "z", "k-late")
	want["z"]++
	want["_total"]++
	if ids["k-late"] != fmt.Sprintf("%s/%d", restored.replica, 2*half+1) {
		t.Fatalf("the first vote after the restore is %s, want seq %d", ids["k-late"], 2*half+1)
	}
	waitFor(t, func() bool { held, _ := b.copies.store.Head("whole", restored.replica); return held == 2*half+1 })
	agreeOn(nodes...)

	// Closed, it certifies every acknowledged vote; there is nothing to
	// accept as lost.
	advanceAll(nodes, 10*time.Second)
	if r := c.admin(t, "POST", "/v1/polls/whole/close", ""); r.status != http.StatusOK {
		t.Fatal(r.raw)
	}
	advanceAll(nodes, 80*time.Second)
	if r := c.admin(t, "POST", "/v1/polls/whole/certify", fmt.Sprintf(`{"accept_lost":[%q],"reason":"disk lost"}`, restored.replica)); r.status != http.StatusBadRequest || !strings.Contains(r.raw, "nothing to accept as lost") {
		t.Fatalf("accept_lost of the restored replica: %d %s, want 400 nothing to accept as lost", r.status, r.raw)
	}
	v := certifiedEverywhere(t, nodes, "whole")
	if int64(v.Total) != want["_total"] || int64(v.Totals["x"]) != want["x"] || int64(v.Totals["y"]) != want["y"] || int64(v.Totals["z"]) != want["z"] {
		t.Fatalf("certified %v (total %d), want %v", v.Totals, v.Total, want)
	}
	if len(v.Detail.Lost)+len(v.Detail.Excluded)+len(v.Detail.FromCopy) != 0 {
		t.Fatalf("certified with lost %v, excluded %v, from copies %v: want none", v.Detail.Lost, v.Detail.Excluded, v.Detail.FromCopy)
	}
	// The auditor reproduces it from the three exports.
	var streams []iter.Seq2[ledger.Record, error]
	for _, e := range exports(t, nodes, "whole") {
		streams = append(streams, ledger.ReadNDJSON(bytes.NewReader(e)))
	}
	def, _ := c.state.Defs.Poll("whole")
	mine, err := ledger.ReconcileWith(ledger.ReconcileConfig{Poll: "whole", ClosesAt: def.ClosesAt, CloseRule: ledger.CloseByNode}, streams...)
	if err != nil || mine.Digest != v.Digest {
		t.Fatalf("the exports give %v (err %v), the certificate %s", mine, err, v.Digest)
	}
}

// TestRestoreNeverLowersTheLiveTally: a node restored from a backup older
// than its last votes, whose buddy (the only holder of their copy) is gone
// too, does not turn ready: /readyz, the votes and the reads answer 503
// naming the records missing and the way out, and the log says it; the
// number on air elsewhere does not move (issue 26, item 3: it went from 7
// to 6; issue 59: 600 to 585). When the buddy comes back with its data
// dir, the restored node completes its chain from the copy and turns ready
// by itself.
func TestRestoreNeverLowersTheLiveTally(t *testing.T) {
	t.Parallel()
	a, b, c := restoreCluster(t)
	if r := c.admin(t, "POST", "/v1/polls", `{"id":"lost2","question":"?","options":[{"id":"a","label":"A"},{"id":"b","label":"B"}],"duration_s":600}`); r.status != http.StatusCreated {
		t.Fatal(r.raw)
	}
	havePoll(t, []*testNode{a, b, c}, "lost2")
	for i := range 3 {
		voteAcked(t, a, "lost2", vote("a", fmt.Sprint("e", i), fmt.Sprint("ke", i)))
		voteAcked(t, c, "lost2", vote("b", fmt.Sprint("u", i), fmt.Sprint("ku", i)))
	}
	bdir, m := takeBackup(t, a)
	voteAcked(t, a, "lost2", vote("b", "e9", "ke9"))
	voteAcked(t, a, "lost2", vote("b", "e0", "ke0-again")) // a change of mind after the backup
	want := map[string]int64{"a": 2, "b": 5, "_total": 7}
	waitFor(t, func() bool { return fmt.Sprint(c.totals(t, "lost2")) == fmt.Sprint(want) })

	// a is destroyed; b, which holds its copy, is stopped (its data dir
	// kept, to come back later).
	ms, bDir := a.clock.ms.Load(), b.cfg.DataDir
	for _, n := range []*testNode{a, b} {
		if err := n.stop(); err != nil {
			t.Fatal(err)
		}
	}
	watch := watchTotals("lost2", c)
	var logs lockedBuffer
	restored := startUnready(t, restoreInto(t, bdir, m), ms, func(cfg *Config) {
		cfg.Region, cfg.Join, cfg.PushPull = "eu", []string{c.GossipAddr()}, 500*time.Millisecond
		cfg.AckCopies, cfg.TrustFloor = 2, 0
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	watch.add(restored)
	gap := "poll lost2: replica " + a.replica + " acknowledged 5 records and holds 3 (seq 4 to 5 missing"
	waitFor(t, func() bool {
		r := restored.call(t, "GET", "/readyz", "")
		return r.status == http.StatusServiceUnavailable && strings.Contains(r.raw, gap)
	})
	for _, path := range []string{"/readyz", "/v1/polls/lost2"} {
		r := restored.call(t, "GET", path, "")
		if r.status != http.StatusServiceUnavailable || !strings.Contains(r.raw, "start a replacement on an empty data dir") {
			t.Fatalf("GET %s at the restored node: %d %s", path, r.status, r.raw)
		}
	}
	r := restored.call(t, "POST", "/v1/polls/lost2/votes", vote("a", "u7", "ku7"))
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(r.raw, gap) {
		t.Fatalf("a vote at the restored node: %d %s", r.status, r.raw)
	}
	if !strings.Contains(logs.String(), "not ready: restored from a backup and short of records") {
		t.Fatalf("the restored node's log does not say why it is not ready:\n%s", logs.String())
	}
	if restored.mayCertify() {
		t.Fatal("a restored node short of records may certify")
	}
	t.Logf("the restored node says: %s", r.raw)

	// The buddy is back: the restored node completes and turns ready.
	back := startNodeAt(t, bDir, ms, func(cfg *Config) {
		cfg.Region, cfg.Join, cfg.PushPull = "eu", []string{c.GossipAddr()}, 500*time.Millisecond
		cfg.AckCopies, cfg.TrustFloor = 2, 0
	})
	waitFor(t, func() bool { return restored.ready.Load() })
	for _, n := range []*testNode{restored, back, c} {
		waitFor(t, func() bool { return fmt.Sprint(n.totals(t, "lost2")) == fmt.Sprint(want) })
	}
	if held, _, err := restored.ledger.Head("lost2", restored.replica); err != nil || held != 5 {
		t.Fatalf("the restored chain holds %d records (%v), want 5", held, err)
	}
	if fell := watch.done(); len(fell) > 0 {
		t.Fatalf("the number on air fell after the restore: %v", fell)
	}
}

// TestRestoreTakesOnlyACopyItSigned: a restored node imports a copy only
// when every record continues its own chain and the copy ends at a head
// signed with its own key; anything else is refused whole (nothing is
// imported from it), and a holder with nothing past the head is "none".
func TestRestoreTakesOnlyACopyItSigned(t *testing.T) {
	t.Parallel()
	l, err := ledger.Open(ledger.Config{Dir: t.TempDir(), Replica: "eu-1", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 5 {
		if _, err := l.Append(ledger.Record{Poll: "p", Voter: fmt.Sprint("v", i), Option: "a", Idem: fmt.Sprint("k", i), Wall: int64(1000 + i), Trust: 1, Counted: true}); err != nil {
			t.Fatal(err)
		}
	}
	var chain []ledger.Record
	for r, err := range l.Scan("p") {
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, r)
	}
	pub, key, _ := ed25519.GenerateKey(nil)
	_, other, _ := ed25519.GenerateKey(nil)
	head := func(k ed25519.PrivateKey, r ledger.Record) *ledger.SignedHead {
		h := ledger.SignHead(k, "p", "eu-1", r.Seq, r.Hash())
		return &h
	}
	stream := func(recs []ledger.Record, h *ledger.SignedHead) *bytes.Buffer {
		var b bytes.Buffer
		if _, err := ledger.WriteStreamHead(&b, ledger.RecordsOf(recs), h); err != nil {
			t.Fatal(err)
		}
		return &b
	}
	foreign := chain[2]
	foreign.Replica = "eu-2"
	for _, c := range []struct {
		name string
		body *bytes.Buffer
		want string // "" for a copy taken
	}{
		{"signed, continuing the chain", stream(chain[2:], head(key, chain[4])), ""},
		{"no head", stream(chain[2:], nil), "no head this replica signed"},
		{"signed by another key", stream(chain[2:], head(other, chain[4])), "not signed with this replica's key"},
		{"a gap after the head held", stream(chain[3:], head(key, chain[4])), "does not continue this chain"},
		{"another replica's record", stream([]ledger.Record{foreign}, nil), "a record of p/eu-2"},
	} {
		recs, err := readCopy(c.body, "p", "eu-1", pub, 2, chain[1].Hash())
		switch {
		case c.want == "" && (err != nil || len(recs) != 3 || recs[2].Seq != 5):
			t.Errorf("%s: %d records, %v; want seq 3 to 5", c.name, len(recs), err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || recs != nil):
			t.Errorf("%s: %d records, %v; want refused: %s", c.name, len(recs), err, c.want)
		}
	}
	if recs, err := readCopy(stream(nil, nil), "p", "eu-1", pub, 5, chain[4].Hash()); err != nil || recs != nil {
		t.Errorf("an empty copy: %d records, %v; want none", len(recs), err)
	}
}
