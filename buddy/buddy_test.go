package buddy

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"tally/internal/testnats"
	"tally/internal/testseal"
	"tally/ledger"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine.func1"))
}

func vote(i int) ledger.Record {
	k := fmt.Sprint("k", i)
	return ledger.Record{Poll: "p", Voter: "v" + k, Option: "red", Idem: k, Wall: int64(1000 + i), Trust: 1, Counted: true, IPHash: "ab12"}
}

// pair is a primary's ledger copying to a buddy's store over NATS, as
// two full nodes do.
type pair struct {
	primary *ledger.Ledger
	store   *Store
	server  *Server
	sender  *Sender
	buddies func() []string
	fs      *vfs.MemFS
	key     ed25519.PrivateKey // eu-1's: the buddy knows eu-1 by its public key
	logged  *syncBuffer        // the buddy's log

	mu     sync.Mutex
	stored []uint64 // the seqs the server's Stored hook was given, in order
}

func newPair(t testing.TB, degrade bool, buddies func() []string) *pair {
	t.Helper()
	conn := testnats.Start(t)
	seal, open := testseal.Sealer("cluster key")
	p := &pair{fs: vfs.NewStrictMem(), buddies: buddies, key: newKey(t), logged: &syncBuffer{}}
	var err error
	if p.store, err = OpenStore("copies", p.fs, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.store.Close() })
	pub := p.key.Public().(ed25519.PublicKey)
	if p.server, err = Serve(ServerConfig{Conn: conn(), Cluster: "c", Replica: "eu-2", Store: p.store, Seal: seal, Open: open,
		KeyOf:  func(replica string) (ed25519.PublicKey, bool) { return pub, replica == "eu-1" },
		Logger: slog.New(slog.NewTextHandler(p.logged, nil)),
		Stored: func(recs []ledger.Record) {
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, r := range recs {
				p.stored = append(p.stored, r.Seq)
			}
		}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.server.Close() })
	var primary *ledger.Ledger
	sc := conn()
	p.sender = NewSender(SenderConfig{Conn: func() *nats.Conn { return sc }, Cluster: "c", Replica: "eu-1", Key: p.key, Buddies: func() []string { return p.buddies() },
		Scan: func(poll, replica string, after uint64) iter.Seq2[ledger.Record, error] {
			return primary.ScanAfter(poll, replica, after)
		},
		Timeout: time.Second, Degrade: degrade, Seal: seal, Open: open,
		RankEvery: time.Nanosecond}) // the tests move the buddies between calls
	if primary, err = ledger.Open(ledger.Config{Dir: "db", FS: vfs.NewMem(), Replica: "eu-1", Copier: p.sender}); err != nil {
		t.Fatal(err)
	}
	p.primary = primary
	t.Cleanup(func() { primary.Close() })
	return p
}

// switchable makes eu-2 the pair's buddy while *up, and nobody else.
func (p *pair) switchable() *bool {
	up := true
	p.buddies = func() []string {
		if up {
			return eu2()
		}
		return nobody()
	}
	return &up
}

func eu2() []string    { return []string{"eu-2"} }
func nobody() []string { return nil }

func (p *pair) copied(t *testing.T) []ledger.Record {
	t.Helper()
	var out []ledger.Record
	for r, err := range p.store.Records("p", "eu-1", 0) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// An acknowledged append is in the buddy's store, byte for byte, as the
// primary's own chain; with no buddy it is refused as not copied, and a
// buddy that comes back is sent what it lacks before the next batch.
func TestAnAckedAppendIsInTheBuddysStore(t *testing.T) {
	p := newPair(t, false, nil)
	up := p.switchable()
	if _, err := p.primary.Append(vote(1), vote(2), vote(3)); err != nil {
		t.Fatal(err)
	}
	if got := p.copied(t); len(got) != 3 || got[2].Seq != 3 || got[2].Hash() != collectOwn(t, p.primary)[2].Hash() {
		t.Fatalf("the store holds %d records after an acked append of 3", len(got))
	}
	*up = false
	if p.sender.Ready() {
		t.Fatal("no buddy, yet Ready")
	}
	if _, err := p.primary.Append(vote(4)); !errors.Is(err, ledger.ErrNotCopied) || !errors.Is(err, ErrNoBuddy) {
		t.Fatalf("with no buddy: %v, want ErrNotCopied and ErrNoBuddy", err)
	}
	*up = true
	if _, err := p.primary.Append(vote(5)); err != nil {
		t.Fatal(err)
	}
	if got := p.copied(t); len(got) != 5 {
		t.Fatalf("after the buddy came back the store holds %d records, want 5 (4 sent as what it lacked)", len(got))
	}
	if err := p.primary.EnsureCopied("p", ledger.VoteID{Replica: "eu-1", Seq: 5}); err != nil {
		t.Fatalf("vote 5 acked but not copied: %v", err)
	}
}

// collectOwn reads the primary's own chain.
func collectOwn(t *testing.T, l *ledger.Ledger) []ledger.Record {
	t.Helper()
	var out []ledger.Record
	for r, err := range l.ScanAfter("p", "eu-1", 0) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// A new buddy (its store empty) is sent the whole chain before the batch
// that found it behind.
func TestANewBuddyIsSentTheWholeChain(t *testing.T) {
	p := newPair(t, false, nobody)
	p.sender.cfg.Degrade = true // the first votes go with one copy
	for i := range 2500 {
		if _, err := p.primary.Append(vote(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.copied(t); len(got) != 0 {
		t.Fatalf("no buddy, yet the store holds %d", len(got))
	}
	p.sender.cfg.Degrade = false
	p.buddies = eu2
	if _, err := p.primary.Append(vote(9999)); err != nil {
		t.Fatal(err)
	}
	got, own := p.copied(t), collectOwn(t, p.primary)
	if len(got) != 2501 || !slices.EqualFunc(got, own, func(a, b ledger.Record) bool { return a.Hash() == b.Hash() }) {
		t.Fatalf("the new buddy holds %d records, the primary %d", len(got), len(own))
	}
}

// Degraded, a vote with no buddy is acknowledged with one copy.
func TestDegradedAcksWithOneCopy(t *testing.T) {
	p := newPair(t, true, nobody)
	if !p.sender.Ready() {
		t.Fatal("degraded with no buddy: not Ready")
	}
	if _, err := p.primary.Append(vote(1)); err != nil {
		t.Fatalf("degraded: %v", err)
	}
}

// A buddy that does not answer (a name no node serves) fails the copy;
// the next one ranked takes it, and the failed one is tried last after.
func TestTheNextBuddyTakesOverFromOneThatFails(t *testing.T) {
	p := newPair(t, false, func() []string { return []string{"eu-9"} })
	if _, err := p.primary.Append(vote(1)); !errors.Is(err, ledger.ErrNotCopied) {
		t.Fatalf("to a buddy that is not there: %v", err)
	}
	p.buddies = func() []string { return []string{"eu-9", "eu-2"} }
	if _, err := p.primary.Append(vote(2)); err != nil {
		t.Fatalf("with eu-2 ranked after the silent eu-9: %v", err)
	}
	if got := p.sender.candidates(); len(got) != 2 || got[0] != "eu-2" {
		t.Fatalf("after eu-9 failed the order is %v, want eu-2 first", got)
	}
	if got := p.copied(t); len(got) != 2 {
		t.Fatalf("eu-2 holds %d records, want 2 (vote 1 sent as what it lacked)", len(got))
	}
}

// A copy the buddy acknowledged survives the buddy's crash: its store is
// fsynced before it answers (Pebble on a StrictMem file system that
// forgets every unsynced write at the crash).
func TestACopyAcknowledgedIsACopyKept(t *testing.T) {
	p := newPair(t, false, eu2)
	for i := range 300 {
		if _, err := p.primary.Append(vote(i)); err != nil {
			t.Fatal(err)
		}
	}
	s := p.crash(t)
	if n, err := s.Head("p", "eu-1"); err != nil || n != 300 {
		t.Fatalf("after the crash the store holds %d of 300 acknowledged records (%v)", n, err)
	}
}

func TestRankSameRegionFirst(t *testing.T) {
	full := []Member{{"eu-1", "eu"}, {"eu-2", "eu"}, {"eu-3", "eu"}, {"us-1", "us"}, {"ap-1", "ap"}, {"", "eu"}}
	for _, tc := range []struct {
		name, replica, region string
		full                  []Member
		want                  []string // nil: any order of the others
		n                     int
	}{
		{"alone", "eu-1", "eu", full[:1], nil, 0},
		{"nobody", "eu-1", "eu", nil, nil, 0},
		{"the region's other", "eu-1", "eu", full[:2], []string{"eu-2"}, 1},
		{"another region's when alone in its own", "us-1", "us", full[3:5], []string{"ap-1"}, 1},
		{"the region's two, then the others", "eu-1", "eu", full, nil, 4},
	} {
		got := Rank(tc.replica, tc.region, tc.full)
		if len(got) != tc.n || tc.want != nil && !slices.Equal(got, tc.want) || slices.Contains(got, tc.replica) || slices.Contains(got, "") {
			t.Errorf("%s: %v, want %d: %v", tc.name, got, tc.n, tc.want)
		}
		if tc.n == 4 && (got[0][:2] != "eu" || got[1][:2] != "eu") {
			t.Errorf("%s: %v does not start with the region's", tc.name, got)
		}
	}
	// The same on every node, and stable when an unrelated node leaves.
	a := Rank("eu-1", "eu", full)
	if b := Rank("eu-1", "eu", slices.Clone(full)); !slices.Equal(a, b) {
		t.Fatalf("two calls ranked %v and %v", a, b)
	}
	var without []Member
	for _, m := range full {
		if m.Replica != "us-1" {
			without = append(without, m)
		}
	}
	if c := Rank("eu-1", "eu", without); c[0] != a[0] {
		t.Fatalf("another region's node left and the buddy moved from %s to %s", a[0], c[0])
	}
}

// The buddy's node hears of each record it stored (Stored, where the node
// applies their ballots) before the primary's append returns: a buddy
// that an edge fails over to knows every acknowledged key. Records sent
// to a buddy that was behind are heard of too.
func TestTheBuddyHearsOfEachCopyBeforeTheAck(t *testing.T) {
	p := newPair(t, false, nil)
	up := p.switchable()
	heard := func() []uint64 {
		p.mu.Lock()
		defer p.mu.Unlock()
		return slices.Clone(p.stored)
	}
	if _, err := p.primary.Append(vote(1), vote(2)); err != nil {
		t.Fatal(err)
	}
	if got := heard(); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("after an acked append of 2 the buddy heard of %v", got)
	}
	*up = false
	if _, err := p.primary.Append(vote(3)); !errors.Is(err, ledger.ErrNotCopied) {
		t.Fatalf("with no buddy: %v", err)
	}
	if got := heard(); len(got) != 2 {
		t.Fatalf("a copy that failed was heard of: %v", got)
	}
	*up = true
	if _, err := p.primary.Append(vote(4)); err != nil {
		t.Fatal(err)
	}
	if got := heard(); !slices.Equal(got, []uint64{1, 2, 3, 4}) {
		t.Fatalf("after the buddy came back it heard of %v, want 1-4 (3 as what it lacked)", got)
	}
}

// Ready runs for every request: it ranks the buddies (a walk of the
// member list) once a RankEvery, not per call; a copy ranks afresh.
func TestReadyReusesTheRanking(t *testing.T) {
	calls := 0
	now := time.Unix(1000, 0)
	s := NewSender(SenderConfig{Buddies: func() []string { calls++; return eu2() }, Now: func() time.Time { return now }, RankEvery: time.Second})
	for range 1000 {
		if !s.Ready() {
			t.Fatal("not Ready with a buddy")
		}
	}
	if calls != 1 {
		t.Fatalf("1000 Ready calls ranked %d times, want 1", calls)
	}
	now = now.Add(time.Second)
	s.Ready()
	if calls != 2 {
		t.Fatalf("after RankEvery: ranked %d times, want 2", calls)
	}
	s.candidates()
	if calls != 3 {
		t.Fatalf("a copy's candidates: ranked %d times, want 3 (afresh)", calls)
	}
}

// A node whose votes are refused for want of a buddy says so in its log,
// with what to do, once a LogEvery: it looks healthy otherwise.
func TestNoBuddyIsLogged(t *testing.T) {
	var logged bytes.Buffer
	now := time.Unix(1000, 0)
	s := NewSender(SenderConfig{Buddies: nobody, Now: func() time.Time { return now }, LogEvery: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	for range 100 {
		if s.Ready() {
			t.Fatal("Ready with no buddy")
		}
	}
	if n := strings.Count(logged.String(), "new votes are refused"); n != 1 || !strings.Contains(logged.String(), "--ack-copies 1") {
		t.Fatalf("logged %d times, want once with what to do:\n%s", n, logged.String())
	}
	now = now.Add(10 * time.Second)
	s.Ready()
	if n := strings.Count(logged.String(), "new votes are refused"); n != 2 {
		t.Fatalf("after LogEvery: logged %d times, want 2", n)
	}
}

// crash drops what the buddy's store did not sync, as a power cut would,
// and opens the store again (closed at the test's end).
func (p *pair) crash(t *testing.T) *Store {
	t.Helper()
	p.fs.SetIgnoreSyncs(true)
	p.server.Close()
	p.store.Close()
	p.fs.ResetToSyncedState()
	p.fs.SetIgnoreSyncs(false)
	s, err := OpenStore("copies", p.fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
