package ledger

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

func TestAppendAssignsChainAndDeduplicates(t *testing.T) {
	fs := vfs.NewMem()
	l := openMem(t, fs, "eu-1")
	out, err := l.Append(vote("p1", "v1", "red", "k1", 10), vote("p1", "v2", "blue", "k2", 11), vote("p1", "v1", "red", "k1", 12))
	if err != nil {
		t.Fatal(err)
	}
	want := []Appended{{ID: VoteID{"eu-1", 1}}, {ID: VoteID{"eu-1", 2}}, {ID: VoteID{"eu-1", 1}, Duplicate: true}}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("result %d = %+v, want %+v", i, out[i], want[i])
		}
	}
	// A retry in a later call gets the first vote id.
	out, err = l.Append(vote("p1", "v2", "red", "k2", 20))
	if err != nil || out[0] != (Appended{ID: VoteID{"eu-1", 2}, Duplicate: true}) {
		t.Fatalf("retry: %+v, %v", out, err)
	}
	// Another poll has its own chain and its own idempotency keys.
	out, err = l.Append(vote("p2", "v1", "red", "k1", 21))
	if err != nil || out[0] != (Appended{ID: VoteID{"eu-1", 1}}) {
		t.Fatalf("other poll: %+v, %v", out, err)
	}
	if id, ok, err := l.Lookup("p1", "k2"); err != nil || !ok || id != (VoteID{"eu-1", 2}) {
		t.Fatalf("Lookup = %v %v %v", id, ok, err)
	}
	if _, ok, _ := l.Lookup("p1", "nope"); ok {
		t.Fatal("Lookup found an unknown key")
	}
	recs := collect(t, l.Scan("p1"))
	if len(recs) != 2 || recs[0].Seq != 1 || recs[1].Seq != 2 || recs[1].Prev != recs[0].Hash() {
		t.Fatalf("scan = %+v", recs)
	}
	if n, h, _ := l.Head("p1", "eu-1"); n != 2 || h != recs[1].Hash() {
		t.Fatalf("Head = %d %v", n, h)
	}
	if st := l.Stats(); st.Appended != 3 || st.Duplicates != 2 {
		t.Fatalf("stats = %+v", st)
	}

	// After a restart the chain continues and retries are still known.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openMem(t, fs, "eu-1")
	out, err = l2.Append(vote("p1", "v3", "red", "k3", 30), vote("p1", "v1", "blue", "k1", 31))
	if err != nil || out[0] != (Appended{ID: VoteID{"eu-1", 3}}) || !out[1].Duplicate {
		t.Fatalf("after restart: %+v, %v", out, err)
	}
	if _, err := VerifyChains(l2.Scan("p1")); err != nil {
		t.Fatal(err)
	}
	if all := collect(t, l2.Replay()); len(all) != 4 {
		t.Fatalf("replay saw %d records, want 4", len(all))
	}
	if polls, _ := l2.Polls(); len(polls) != 2 {
		t.Fatalf("Polls = %v", polls)
	}
}

func TestAppendRejectsInvalidVotes(t *testing.T) {
	l := openMem(t, nil, "eu-1")
	bad := map[string]Record{
		"poll with slash":   vote("p/1", "v", "o", "k", 1),
		"empty voter":       vote("p", "", "o", "k", 1),
		"long idem":         vote("p", "v", "o", string(make([]byte, MaxIdemLen+1)), 1),
		"control in option": vote("p", "v", "o\x00", "k", 1),
		"bad utf8 voter":    vote("p", "\xff", "o", "k", 1),
		"no hlc":            vote("p", "v", "o", "k", 0),
		"trust > 1":         func() Record { r := vote("p", "v", "o", "k", 1); r.Trust = 2; return r }(),
		"ip hash not hex":   func() Record { r := vote("p", "v", "o", "k", 1); r.IPHash = "zz"; return r }(),
	}
	for name, r := range bad {
		t.Run(name, func(t *testing.T) {
			// A bad record anywhere in a call fails the whole call.
			if _, err := l.Append(vote("p", "v", "o", "ok", 1), r); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
	if recs := collect(t, l.Replay()); len(recs) != 0 {
		t.Fatalf("invalid calls wrote %d records", len(recs))
	}
	closed := openMem(t, nil, "eu-1")
	closed.Close()
	if _, err := closed.Append(vote("p", "v", "o", "k", 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	reader := openMem(t, nil, "")
	if _, err := reader.Append(vote("p", "v", "o", "k", 1)); !errors.Is(err, ErrNoReplica) {
		t.Fatalf("append without replica: %v", err)
	}
}

func TestConcurrentAppendsShareCommits(t *testing.T) {
	l := openMem(t, nil, "eu-1")
	const writers, per = 64, 50
	var wg sync.WaitGroup
	ids := make(chan VoteID, writers*per)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				// Every key is appended twice, by two writers racing.
				k := idem((w/2)*per + i)
				out, err := l.Append(vote("p", k, "o", k, int64(1+i)))
				if err != nil {
					t.Error(err)
					return
				}
				if !out[0].Duplicate {
					ids <- out[0].ID
				}
			}
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[VoteID]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("vote id %v handed out twice", id)
		}
		seen[id] = true
	}
	if len(seen) != writers*per/2 {
		t.Fatalf("%d records appended, want %d", len(seen), writers*per/2)
	}
	chains, err := VerifyChains(l.Scan("p"))
	if err != nil || chains[0].Records != writers*per/2 {
		t.Fatalf("verify: %+v %v", chains, err)
	}
	assertIndexAgrees(t, l, "p")
	if st := l.Stats(); st.Commits >= st.Appended {
		t.Logf("stats: %+v (no coalescing observed this run)", st)
	}
}

// assertIndexAgrees checks that every record is in the idempotency index
// under its own vote id, and every index entry names a stored record.
func assertIndexAgrees(t *testing.T, l *Ledger, poll string) {
	t.Helper()
	recs := collect(t, l.Scan(poll))
	byID := map[VoteID]Record{}
	for _, r := range recs {
		byID[r.ID()] = r
		id, ok, err := l.Lookup(poll, r.Idem)
		if err != nil || !ok || id != r.ID() {
			t.Fatalf("index for %q = %v %v %v, want %v", r.Idem, id, ok, err, r.ID())
		}
	}
	prefix := idemKey(nil, poll, "")
	it, err := l.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for it.SeekGE(prefix); it.Valid() && len(it.Key()) >= len(prefix) && string(it.Key()[:len(prefix)]) == string(prefix); it.Next() {
		id, err := decodeVoteID(it.Value())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := byID[id]; !ok {
			t.Fatalf("index entry %q → %v names no record", it.Key(), id)
		}
	}
}

// TestASecondOpenSaysTheDirIsInUse: a data dir held open is refused as
// locked, in words. (Another process's hold, EAGAIN from the lock, names
// its pid; tried by hand with a running node and tally ledger export.)
func TestASecondOpenSaysTheDirIsInUse(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir, Replica: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = Open(Config{Dir: dir, ReadOnly: true})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "is in use") {
		t.Fatalf("second open: %v", err)
	}
}

// ScanAfter yields one replica's chain of one poll above a seq: not the
// records below it, not another poll's, not those of a replica whose id
// starts with this one's.
func TestScanAfterYieldsOneChainsTail(t *testing.T) {
	fs := vfs.NewMem()
	l := openMem(t, fs, "eu")
	for i := range 5 {
		if _, err := l.Append(vote("p", "v"+string(rune('a'+i)), "red", "k"+string(rune('a'+i)), int64(10+i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(vote("p2", "v", "red", "k", 20)); err != nil {
		t.Fatal(err)
	}
	other := openMem(t, vfs.NewMem(), "eu-2") // a replica id with "eu" as its prefix
	if _, err := other.Append(vote("p", "w", "red", "w", 30)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Import(other.Scan("p")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		after uint64
		want  []uint64
	}{{0, []uint64{1, 2, 3, 4, 5}}, {3, []uint64{4, 5}}, {5, nil}, {99, nil}, {^uint64(0), nil}} {
		var got []uint64
		for r, err := range l.ScanAfter("p", "eu", c.after) {
			if err != nil {
				t.Fatal(err)
			}
			if r.Poll != "p" || r.Replica != "eu" {
				t.Fatalf("after %d: record of %s/%s", c.after, r.Poll, r.Replica)
			}
			got = append(got, r.Seq)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("ScanAfter(p, eu, %d) = %v, want %v", c.after, got, c.want)
		}
	}
	if n := len(collect(t, l.ScanAfter("p", "eu-2", 0))); n != 1 {
		t.Errorf("the imported chain's tail: %d records, want 1", n)
	}
}
