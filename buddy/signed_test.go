package buddy

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/internal/testseal"
	"tally/ledger"
)

func newKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// syncBuffer is a log a test reads while the server writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// readCopy reads the store's copy of eu-1's chain of p as certification
// is served it: the records up to the signed head, and the head.
func readCopy(t *testing.T, s *Store, after uint64) ([]ledger.Record, *ledger.SignedHead) {
	t.Helper()
	recs, head, err := s.Copy("p", "eu-1", after)
	if err != nil {
		t.Fatal(err)
	}
	var out []ledger.Record
	for r, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out, head
}

// Every acknowledged record is covered, on the buddy, by the primary's
// own signed head: the store keeps, with each copy, the head of its chain
// signed with the primary's key, at the last record acknowledged —
// through catch-ups, retries of old records (EnsureCopied) and the
// buddy's crash.
func TestACopyCarriesItsReplicasSignedHead(t *testing.T) {
	p := newPair(t, false, nil)
	up := p.switchable()
	covered := func(want uint64) {
		t.Helper()
		recs, head := readCopy(t, p.store, 0)
		own := collectOwn(t, p.primary)
		if head == nil || head.Seq != want || uint64(len(recs)) != want || len(own) < int(want) ||
			head.Hash != own[want-1].Hash() || !head.Verify() || !bytes.Equal(head.Pub, p.key.Public().(ed25519.PublicKey)) {
			t.Fatalf("copy of %d records, head %+v; want eu-1's signed head at %d", len(recs), head, want)
		}
	}
	if _, err := p.primary.Append(vote(1), vote(2), vote(3)); err != nil {
		t.Fatal(err)
	}
	covered(3)
	*up = false
	p.primary.Append(vote(4)) // not copied: no buddy
	*up = true
	if _, err := p.primary.Append(vote(5)); err != nil {
		t.Fatal(err)
	}
	covered(5) // 4 sent as what the buddy lacked, 5 with the head
	// A retry of an old key copies its record again: the head stays at 5.
	if err := p.primary.EnsureCopied("p", ledger.VoteID{Replica: "eu-1", Seq: 2}); err != nil {
		t.Fatal(err)
	}
	covered(5)
	if recs, head := readCopy(t, p.store, 3); len(recs) != 2 || head == nil || head.Seq != 5 {
		t.Fatalf("the copy after seq 3: %d records, head %+v", len(recs), head)
	}
	if recs, head := readCopy(t, p.store, 5); len(recs) != 0 || head != nil {
		t.Fatalf("the copy after its head: %d records, head %+v", len(recs), head)
	}
	// The buddy's crash keeps records and head together.
	s := p.crash(t)
	if recs, head := readCopy(t, s, 0); len(recs) != 5 || head == nil || head.Seq != 5 {
		t.Fatalf("after the crash: %d records, head %+v", len(recs), head)
	}
}

// A copy signed with a key other than the one its replica is known by —
// a member with the cluster key writing under another replica's name —
// is refused by the buddy and logged with its sender; so is a sender
// with no key at all.
func TestACopySignedWithAnotherKeyIsRefused(t *testing.T) {
	p := newPair(t, false, eu2)
	p.sender.cfg.Key = newKey(t) // not the key eu-1 is known by
	if _, err := p.primary.Append(vote(1)); !errors.Is(err, ledger.ErrNotCopied) {
		t.Fatalf("a copy signed with another key: %v, want ErrNotCopied", err)
	}
	if recs, head := readCopy(t, p.store, 0); len(recs) != 0 || head != nil {
		t.Fatalf("the store took %d records, head %+v", len(recs), head)
	}
	if log := p.logged.String(); !strings.Contains(log, "not signed by its replica's key") || !strings.Contains(log, "from=eu-1") {
		t.Fatalf("the buddy's log: %s", log)
	}
	p.sender.cfg.Key = nil
	if _, err := p.primary.Append(vote(2)); !errors.Is(err, ledger.ErrNotCopied) || !errors.Is(err, ErrNoKey) {
		t.Fatalf("no key: %v, want ErrNotCopied and ErrNoKey", err)
	}
	p.sender.cfg.Key = p.key
	if _, err := p.primary.Append(vote(3)); err != nil {
		t.Fatal(err)
	}
	if recs, head := readCopy(t, p.store, 0); len(recs) != 3 || head == nil || head.Seq != 3 {
		t.Fatalf("with eu-1's key: %d records, head %+v", len(recs), head)
	}
}

// A forged request that reaches the buddy — well sealed, right records,
// a head whose signature does not verify — is refused and stores nothing.
func TestAHeadThatDoesNotVerifyIsRefused(t *testing.T) {
	p := newPair(t, false, eu2)
	recs := sampleRecords()
	heads := signHeads(p.key, recs)
	heads[0].Sig[0] ^= 1
	seal, open := testseal.Sealer("cluster key")
	conn := p.sender.cfg.Conn()
	m, err := conn.Request(Subject("c", "eu-2"), seal(appendRequest(nil, request{From: "eu-1", Recs: recs, Heads: heads})), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	body, err := open(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := decodeReply(body)
	if err != nil || rep.Status != statusRefuse || !strings.Contains(rep.Reason, "does not verify") {
		t.Fatalf("%+v %v", rep, err)
	}
	if got, head := readCopy(t, p.store, 0); len(got) != 0 || head != nil {
		t.Fatalf("the store took %d records, head %+v", len(got), head)
	}
}

// BenchmarkCopyHead measures what the signed heads add to a copy: the
// primary signs one head per chain a request, the buddy verifies it;
// against them, encoding and sealing a request of n records, and an
// acknowledged append through the whole copy path (NATS on loopback, the
// buddy's store on an in-memory file system: no real fsync, so the
// share is an upper bound).
func BenchmarkCopyHead(b *testing.B) {
	key := newKey(b)
	recs := make([]ledger.Record, 64)
	for i := range recs {
		recs[i] = vote(i)
		recs[i].Replica, recs[i].Seq = "eu-1", uint64(i+1)
	}
	seal, _ := testseal.Sealer("cluster key")
	b.Run("sign", func(b *testing.B) {
		for b.Loop() {
			signHeads(key, recs[:1])
		}
	})
	h := signHeads(key, recs[:1])[0]
	b.Run("verify", func(b *testing.B) {
		for b.Loop() {
			if !h.Verify() {
				b.Fatal("does not verify")
			}
		}
	})
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprint("encode-seal-", n), func(b *testing.B) {
			for b.Loop() {
				seal(appendRequest(nil, request{From: "eu-1", Recs: recs[:n]}))
			}
		})
	}
	b.Run("append-copied", func(b *testing.B) {
		p := newPair(b, false, eu2)
		p.sender.cfg.Logger = slog.New(slog.DiscardHandler)
		i := 0
		for b.Loop() {
			if _, err := p.primary.Append(vote(i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
