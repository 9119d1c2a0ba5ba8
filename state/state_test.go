package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"tally/crdt"
	"tally/hlc"
	"tally/internal/memstore"
	"tally/poll"
)

// memStore stands in for the ledger's metadata space.
type memStore = memstore.Store

func def(id string) poll.Definition {
	return poll.Definition{ID: id, Question: "Best colour?", Options: []poll.Option{{ID: "red", Label: "Red"}, {ID: "blue", Label: "Blue"}}, OpensAt: 1_796_083_200_000, ClosesAt: 1_796_083_260_000, GraceMs: 2000}
}

func TestConcurrentCountsSumExactly(t *testing.T) {
	s, err := New(Config{Replica: "eu-1", Stripes: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Defs.PutPoll(def("p"), hlc.Timestamp{Wall: 1, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				s.Count("p", "red", 1)
				if (g+i)%4 == 0 { // a quarter of the votes move to blue
					s.Count("p", "red", -1)
					s.Count("p", "blue", 1)
				}
				s.AddRecords("p", 1)
			}
		}()
	}
	// Readers run while writers write.
	for range 50 {
		if _, _, err := s.Totals("p"); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	totals, sum, err := s.Totals("p")
	if err != nil {
		t.Fatal(err)
	}
	if totals["red"] != 12000 || totals["blue"] != 4000 || sum != 16000 {
		t.Fatalf("totals %v sum %d", totals, sum)
	}
	tl, _ := s.Tally("p")
	if tl.Records("eu-1") != 16000 {
		t.Fatalf("records = %d", tl.Records("eu-1"))
	}
	if err := s.Count("p", "green", 1); err == nil {
		t.Fatal("counted an option the poll does not have")
	}
	if err := s.Count("nope", "red", 1); err == nil {
		t.Fatal("counted in an unknown poll")
	}
}

func TestRemoteEntriesMergeWithLocal(t *testing.T) {
	s, _ := New(Config{Replica: "eu-1"})
	s.Defs.PutPoll(def("p"), hlc.Timestamp{Wall: 1, Replica: "eu-1"})
	s.Count("p", "red", 2)
	remote := crdt.NewTally()
	remote.Add("us-1", "red", 5)
	remote.Add("us-1", "blue", 1)
	// A stale echo of our own entry must not lower it.
	remote.MergeEntry("eu-1", "red", 1, 0)
	if changed, err := s.Merge("p", remote); err != nil || !changed {
		t.Fatalf("merge: %v %v", changed, err)
	}
	totals, sum, _ := s.Totals("p")
	if totals["red"] != 7 || totals["blue"] != 1 || sum != 8 {
		t.Fatalf("totals %v", totals)
	}
}

func TestDefinitionsPersistAndLastWriterWins(t *testing.T) {
	store := &memStore{}
	s, _ := New(Config{Replica: "eu-1", Store: store})
	d := def("p")
	if won, err := s.Defs.PutPoll(d, hlc.Timestamp{Wall: 5, Replica: "eu-1"}); !won || err != nil {
		t.Fatalf("create: %v %v", won, err)
	}
	closed := d
	closed.ClosesAt = d.OpensAt + 30000
	if won, _ := s.Defs.PutPoll(closed, hlc.Timestamp{Wall: 9, Replica: "us-1"}); !won {
		t.Fatal("newer close lost")
	}
	if won, _ := s.Defs.PutPoll(d, hlc.Timestamp{Wall: 7, Replica: "ap-1"}); won {
		t.Fatal("older write won")
	}
	bad := d
	bad.Options = bad.Options[:1]
	if _, err := s.Defs.PutPoll(bad, hlc.Timestamp{Wall: 10}); err == nil {
		t.Fatal("invalid definition accepted")
	}
	again, err := New(Config{Replica: "eu-1", Store: store})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := again.Defs.Poll("p")
	if !ok || got.ClosesAt != d.OpensAt+30000 {
		t.Fatalf("after reload: %+v %v", got, ok)
	}
	if len(again.Defs.Polls()) != 1 {
		t.Fatalf("polls = %v", again.Defs.Polls())
	}
}

// A stored definition that no longer validates (written by an earlier
// version with looser rules) is set aside and reported; the others load.
func TestStoredDefinitionOutOfBoundsIsSetAside(t *testing.T) {
	store := &memStore{}
	s, _ := New(Config{Replica: "eu-1", Store: store})
	if _, err := s.Defs.PutPoll(def("good"), hlc.Timestamp{Wall: 5, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	old := def("old")
	old.ClosesAt = math.MaxInt64 // accepted before times were bounded
	b, _ := json.Marshal(crdt.Register[poll.Definition]{TS: hlc.Timestamp{Wall: 6, Replica: "eu-1"}, Value: old})
	if err := store.PutMeta(pollPrefix+"old", b); err != nil {
		t.Fatal(err)
	}
	again, err := New(Config{Replica: "eu-1", Store: store})
	if err != nil {
		t.Fatalf("a stored definition out of today's bounds stops the start: %v", err)
	}
	if _, ok := again.Defs.Poll("good"); !ok {
		t.Fatal("the valid poll was not loaded")
	}
	if _, ok := again.Defs.Poll("old"); ok || again.Defs.SetAside()["old"] == nil {
		t.Fatalf("the invalid poll: served %v, set aside %v", ok, again.Defs.SetAside())
	}
}

// TestMergeLiftsOwnCells: after a restart the cluster may report this
// replica's P and N above what its replay rebuilt (same count, more
// changes of mind on the way); the cells are raised to dominate them with
// the count unchanged, so the next vote shows everywhere.
func TestMergeLiftsOwnCells(t *testing.T) {
	s, _ := New(Config{Replica: "eu-1"})
	s.Defs.PutPoll(def("p"), hlc.Timestamp{Wall: 1, Replica: "eu-1"})
	s.Count("p", "red", 3) // replayed: P 3, N 0, count 3
	old := crdt.NewTally()
	old.MergeEntry("eu-1", "red", 5, 2) // before the restart: P 5, N 2, count 3
	if _, err := s.Merge("p", old); err != nil {
		t.Fatal(err)
	}
	if tot, _, _ := s.Totals("p"); tot["red"] != 3 {
		t.Fatalf("count after the lift: %d, want 3", tot["red"])
	}
	s.Count("p", "red", 1)
	// What this replica now reports dominates the old entry and carries the vote.
	mine, _ := s.Tally("p")
	c := mine.Counter("red")
	if c.P.Get("eu-1") < 5 || c.N.Get("eu-1") < 2 || c.Value() != 4 {
		t.Fatalf("own entry P %d N %d value %d", c.P.Get("eu-1"), c.N.Get("eu-1"), c.Value())
	}
	// A node that held the old entry sees the new vote.
	other := crdt.NewTally()
	other.MergeEntry("eu-1", "red", 5, 2)
	other.Merge(mine)
	if other.Value("red") != 4 {
		t.Fatalf("another node sees %d, want 4", other.Value("red"))
	}
}

// The poll bound holds for definitions from gossip as from the API; a
// newer version of a poll already held (a close) is still taken.
func TestMaxPolls(t *testing.T) {
	s, _ := New(Config{Replica: "eu-1", MaxPolls: 2})
	for i, id := range []string{"a", "b"} {
		if _, err := s.Defs.PutPoll(def(id), hlc.Timestamp{Wall: int64(5 + i), Replica: "eu-1"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Defs.MergePoll(crdt.Register[poll.Definition]{TS: hlc.Timestamp{Wall: 9, Replica: "us-1"}, Value: def("c")}); !errors.Is(err, ErrTooManyPolls) {
		t.Fatalf("a third poll from gossip: %v", err)
	}
	closed := def("a")
	closed.ClosesAt = closed.OpensAt + 1000
	if won, err := s.Defs.PutPoll(closed, hlc.Timestamp{Wall: 10, Replica: "us-1"}); !won || err != nil {
		t.Fatalf("closing a poll at the bound: %v %v", won, err)
	}
	if n := len(s.Defs.Polls()); n != 2 {
		t.Fatalf("%d polls held", n)
	}
}

// A forgotten poll leaves memory with its certificate, and neither a
// gossiped definition nor a reload brings it back.
func TestForgetIsKept(t *testing.T) {
	store := &memStore{}
	s, _ := New(Config{Replica: "eu-1", Store: store})
	d := def("p")
	if _, err := s.Defs.PutPoll(d, hlc.Timestamp{Wall: 5, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Defs.PutPoll(def("q"), hlc.Timestamp{Wall: 5, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Defs.Forget("p", 99); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Defs.Poll("p"); ok || !s.Defs.Forgotten("p") || len(s.Defs.Polls()) != 1 {
		t.Fatal("still held after Forget")
	}
	if won, err := s.Defs.MergePoll(crdt.Register[poll.Definition]{TS: hlc.Timestamp{Wall: 50, Replica: "us-1"}, Value: d}); won || err != nil {
		t.Fatalf("gossip brought it back: %v %v", won, err)
	}
	again, err := New(Config{Replica: "eu-1", Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := again.Defs.Poll("p"); ok || !again.Defs.Forgotten("p") {
		t.Fatal("a reload brought it back")
	}
	if _, ok := again.Defs.Poll("q"); !ok {
		t.Fatal("the other poll was lost")
	}
}

// TestViewersAcrossReplicas: the poll's viewers are this replica's own
// count plus every other replica's report still fresh; reports for unknown
// polls, negative counts and reports past the bound are ignored.
func TestViewersAcrossReplicas(t *testing.T) {
	s, _ := New(Config{Replica: "eu-1"})
	if got := s.Audience.Count("p", 0); got != 0 {
		t.Fatalf("viewers of an unknown poll: %d", got)
	}
	s.Defs.PutPoll(def("p"), hlc.Timestamp{Wall: 1, Replica: "eu-1"})
	if _, ok := s.Audience.Own("p"); ok {
		t.Fatal("own viewers reported before any")
	}
	s.Audience.Set("p", 3, 1000)
	s.Audience.Merge("p", "other", 5, 1000)
	s.Audience.Merge("p", "liar", -7, 1000)
	s.Audience.Merge("nope", "other", 9, 1000)
	if got := s.Audience.Count("p", 1000); got != 8 {
		t.Fatalf("viewers %d, want 8", got)
	}
	// The other's report goes stale; our own count never does.
	if got := s.Audience.Count("p", 1000+ViewersFresh.Milliseconds()+1); got != 3 {
		t.Fatalf("viewers after the other's report went stale: %d, want 3", got)
	}
	for i := range maxViewerReports + 10 {
		s.Audience.Merge("p", fmt.Sprint("r", i), 1, 2000)
	}
	if got := s.Audience.Count("p", 2000); got > 3+5+maxViewerReports {
		t.Fatalf("reports past the bound counted: %d", got)
	}
}

// TestTokenBudgetCounts: token counts merge by max per replica, sum across
// replicas, stay within the window, and a restarted replica takes its own
// former counts back from a peer's view.
func TestTokenBudgetCounts(t *testing.T) {
	newState := func(replica string) *State {
		s, err := New(Config{Replica: replica})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const minute = 60_000
	now := int64(1_000_000) * minute
	a, b := newState("a"), newState("b")
	a.Budget.Issue([]uint64{1, 2}, now)
	a.Budget.Issue([]uint64{1}, now+minute)
	b.Budget.Issue([]uint64{1}, now+minute)
	for _, e := range []struct {
		from *State
		name string
	}{{a, "a"}, {a, "a"}} { // a replay changes nothing
		b.Budget.Merge(e.name, e.from.Budget.View()[e.name], now+minute)
	}
	if got := b.Budget.Within(1, now+minute, 2); got != 3 {
		t.Fatalf("group 1 over two minutes: %d, want 3", got)
	}
	if got := b.Budget.Within(1, now+minute, 1); got != 2 {
		t.Fatalf("group 1 this minute: %d, want 2", got)
	}
	if n := b.Budget.Merge("a", []BudgetEntry{{Group: 1, Minute: now / minute, N: 0}}, now+minute); n != 0 || b.Budget.Within(1, now+minute, 2) != 3 {
		t.Fatal("a lower count lowered the budget")
	}
	if n := b.Budget.Merge("a", []BudgetEntry{{Group: 9, Minute: now/minute - BudgetMinutes - 1, N: 5}, {Group: 9, Minute: now/minute + 5, N: 5}}, now); n != 0 {
		t.Fatal("counts outside the window were taken")
	}

	// a restarts empty and learns its own counts back from b's view.
	a2 := newState("a")
	for replica, entries := range b.Budget.View() {
		a2.Budget.Merge(replica, entries, now+minute)
	}
	if got := a2.Budget.Within(1, now+minute, 2); got != 3 {
		t.Fatalf("after the restart: %d, want 3", got)
	}
	a2.Budget.Issue([]uint64{1}, now+minute)
	if own := a2.Budget.Take(); len(own) != 1 || own[0].N != 2 {
		t.Fatalf("own count after the restart: %+v, want 2 (1 learned back + 1)", own)
	}
}

// TestTokenBudgetSurvivesARestart: a node's counts, its own and those it
// heard, are in its store; a restart reads them back, and the window's
// end removes them from the store too.
func TestTokenBudgetSurvivesARestart(t *testing.T) {
	const minute = 60_000
	now := int64(1_000_000) * minute
	clock := func() time.Time { return time.UnixMilli(now) }
	store := &memStore{}
	a, err := New(Config{Replica: "a", Store: store, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	a.Budget.Issue([]uint64{1, 2}, now)
	a.Budget.Issue([]uint64{1}, now)
	a.Budget.Merge("b", []BudgetEntry{{Group: 1, Minute: now / minute, N: 4}}, now)
	again, err := New(Config{Replica: "a", Store: store, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Budget.Within(1, now, 1); got != 6 {
		t.Fatalf("group 1 after the restart: %d, want 6 (2 own + 4 heard)", got)
	}
	if got := again.Budget.Within(2, now, 1); got != 1 {
		t.Fatalf("group 2 after the restart: %d, want 1", got)
	}
	again.Budget.Issue([]uint64{1}, now)
	if own := again.Budget.Take(); len(own) != 1 || own[0].N != 3 {
		t.Fatalf("own count after the restart: %+v, want 3", own)
	}
	// A damaged entry is skipped, the others still load.
	store.PutMeta(budgetPrefix+"zz/a/1", []byte{1})
	store.PutMeta(budgetName(now/minute, "a", 9), []byte{0xff})
	if s, err := New(Config{Replica: "a", Store: store, Now: clock}); err != nil || s.Budget.Within(1, now, 1) != 7 || s.Budget.Within(9, now, 1) != 0 {
		t.Fatalf("with damaged entries: %v", err)
	}
	// A day later the window has passed: the next count sweeps the store.
	now += BudgetMinutes * minute
	again.Budget.Issue([]uint64{3}, now)
	for name := range store.MetaWithPrefix(budgetPrefix) {
		if m, _, _, _, ok := parseBudget(name, []byte{1}); ok && m <= now/minute-BudgetMinutes {
			t.Fatalf("%s outlived the window", name)
		}
	}
}

// FuzzParseBudget: the stored counts' decoder never panics and reads back
// exactly what budgetName wrote.
func FuzzParseBudget(f *testing.F) {
	f.Add(budgetName(29_000_000, "eu-1", 42), []byte{7})
	f.Add("budget/", []byte{})
	f.Add("budget/0000000001//0000000000000001", []byte{1})
	f.Fuzz(func(t *testing.T, name string, value []byte) {
		m, replica, group, n, ok := parseBudget(name, value)
		if !ok {
			return
		}
		if budgetName(m, replica, group) != name {
			t.Fatalf("%q read as %d %q %d", name, m, replica, group)
		}
		_ = n
	})
}

// TestJoinersAcrossReplicas: a quiz lobby's newest names are this
// replica's own and every fresh report's, newest first (in one
// millisecond by join order), each name once, at most MaxJoiners; an
// older report than the one held, an invalid name and a stale report
// change nothing.
func TestJoinersAcrossReplicas(t *testing.T) {
	s, _ := New(Config{Replica: "eu-1"})
	s.Defs.PutPoll(def("p"), hlc.Timestamp{Wall: 1, Replica: "eu-1"})
	s.Audience.SetJoiners("p", []Joiner{{"Ann", 100, 2, 0}, {"Bob", 100, 1, 0}}, 1000)
	s.Audience.MergeJoiners("p", "us-1", []Joiner{{"Cleo", 150, 9, 0}, {"Ann", 90, 4, 0}, {"Ann\u202e", 200, 5, 0}}, 1000)
	s.Audience.MergeJoiners("p", "us-1", []Joiner{{"Old", 999, 1, 0}}, 900) // older than the one held
	s.Audience.MergeJoiners("nope", "us-1", []Joiner{{"Dan", 1, 1, 0}}, 1000)
	if got, want := s.Audience.Joiners("p", 1000), []string{"Cleo", "Ann", "Bob"}; !slices.Equal(got, want) {
		t.Fatalf("joiners %q, want %q", got, want)
	}
	// us-1's report goes stale; our own never does.
	if got, want := s.Audience.Joiners("p", 1000+ViewersFresh.Milliseconds()+1), []string{"Ann", "Bob"}; !slices.Equal(got, want) {
		t.Fatalf("joiners after us-1's report went stale: %q, want %q", got, want)
	}
	var many []Joiner
	for i := range 20 {
		many = append(many, Joiner{fmt.Sprint("P", i), int64(200 + i), uint64(i), 0})
	}
	s.Audience.MergeJoiners("p", "ap-1", many, 2000)
	if got := s.Audience.Joiners("p", 2000); len(got) != MaxJoiners || got[0] != "P7" {
		t.Fatalf("joiners of a long report: %q, want the report's first %d", got, MaxJoiners)
	}
	if own, ok := s.Audience.OwnJoiners("p"); !ok || len(own) != 2 {
		t.Fatalf("own joiners: %v %v", own, ok)
	}
}
