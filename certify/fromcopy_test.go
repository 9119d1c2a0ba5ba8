package certify

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tally/api"
	"tally/hlc"
	"tally/ledger"
	"tally/state"
)

// copyRig is a prefetchRig whose us-1 is destroyed: its node is no
// longer a member, and its chain (7 votes for b) is read from the copy
// ap-1 holds of it, as ap-1's copy endpoint serves it (serve, given the
// after of each read: what the test makes ap-1 hand over). Every
// replica's key is known to the certifier, as its members announced them.
type copyRig struct {
	*prefetchRig
	keys   map[string]ed25519.PrivateKey
	chain  []ledger.Record // us-1's genuine chain
	serve  atomic.Pointer[func(after uint64) []byte]
	reads  atomic.Int64 // reads of the copy
	logged *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newCopyRig(t *testing.T) *copyRig { return newCopyRigKnowing(t, "eu-1", "us-1", "ap-1") }

// newCopyRigKnowing is newCopyRig whose certifier knows the keys of the
// replicas named only.
func newCopyRigKnowing(t *testing.T, known ...string) *copyRig {
	t.Helper()
	r := &copyRig{prefetchRig: newPrefetchRig(t, 0), keys: map[string]ed25519.PrivateKey{}, logged: &lockedBuffer{}}
	for _, rep := range []string{"eu-1", "us-1", "ap-1"} {
		_, key, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		r.keys[rep] = key
		if !slices.Contains(known, rep) {
			continue
		}
		if err := r.st.Defs.LearnKey(rep, key.Public().(ed25519.PublicKey)); err != nil {
			t.Fatal(err)
		}
	}
	r.vote("eu-1", 2, "a")
	r.vote("us-1", 7, "b")
	r.vote("ap-1", 3, "a")
	for rec, err := range r.ledgers["us-1"].ScanAfter("p", "us-1", 0) {
		if err != nil {
			t.Fatal(err)
		}
		r.chain = append(r.chain, rec)
	}
	r.now = time.UnixMilli(r.def.GraceEnd() + 1)
	r.c.log = slog.New(slog.NewTextHandler(r.logged, nil))
	r.c.cfg.Peers = func() []Peer { // us-1 is gone
		return []Peer{{Name: "n1", Replica: "eu-1", Full: true}, {Name: "n3", Replica: "ap-1", Full: true}}
	}
	own := r.c.cfg.Fetch
	r.c.cfg.Fetch = func(ctx context.Context, p Peer, pollID string, after uint64, fence hlc.Timestamp) (io.ReadCloser, error) {
		if p.CopyOf == "" {
			return own(ctx, p, pollID, after, fence)
		}
		if p.Replica != "ap-1" && p.Holder != "ap-1" || p.CopyOf != "us-1" {
			return io.NopCloser(bytes.NewReader(streamOf(nil, nil))), nil // holds no copy
		}
		r.reads.Add(1)
		return io.NopCloser(bytes.NewReader((*r.serve.Load())(after))), nil
	}
	r.serveCopy(r.chain, r.signed("us-1", r.chain))
	return r
}

// serveCopy makes ap-1 serve recs and head as its copy endpoint does.
func (r *copyRig) serveCopy(recs []ledger.Record, head *ledger.SignedHead) {
	f := func(after uint64) []byte { return streamOf(recs[min(after, uint64(len(recs))):], head) }
	r.serve.Store(&f)
}

// signed is key's signed head of recs' last record.
func (r *copyRig) signed(key string, recs []ledger.Record) *ledger.SignedHead {
	last := recs[len(recs)-1]
	h := ledger.SignHead(r.keys[key], last.Poll, last.Replica, last.Seq, last.Hash())
	return &h
}

func streamOf(recs []ledger.Record, head *ledger.SignedHead) []byte {
	var buf bytes.Buffer
	if _, err := ledger.WriteStreamHead(&buf, ledger.RecordsOf(recs), head); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// forged is a chain in us-1's name of the genuine one's length, linked
// and hashed consistently, every vote for a instead of b: what a member
// holding the cluster key could write.
func (r *copyRig) forged() []ledger.Record {
	var out []ledger.Record
	var prev ledger.Hash
	for _, rec := range r.chain {
		rec = ledger.Record{Poll: rec.Poll, Replica: rec.Replica, Seq: rec.Seq, Wall: rec.Wall, Logical: rec.Logical, Voter: rec.Voter,
			Option: "a", Idem: rec.Idem, Trust: rec.Trust, Counted: rec.Counted, IPHash: rec.IPHash, Prev: prev}
		prev = rec.Hash()
		out = append(out, rec)
	}
	return out
}

func fromCopy(t *testing.T, cert state.Certificate) []api.CopySource {
	t.Helper()
	var d api.ResultDetail
	if err := json.Unmarshal(cert.Detail, &d); err != nil {
		t.Fatal(err)
	}
	return d.FromCopy
}

// A destroyed replica's votes are certified from its buddy's copy, which
// ends at the head the replica signed with its own key.
func TestACopySignedByItsReplicaCertifies(t *testing.T) {
	r := newCopyRig(t)
	cert, err := r.c.Certify(context.Background(), "p", Decisions{})
	if err != nil || cert.Status != state.Reconciled || cert.Totals["b"] != 7 || cert.Total != 12 {
		t.Fatalf("%s %v (%s) %v", cert.Status, cert.Totals, cert.Reason, err)
	}
	if src := fromCopy(t, cert); len(src) != 1 || src[0] != (api.CopySource{Replica: "us-1", Holder: "ap-1", Records: 7}) {
		t.Fatalf("from_copy %+v", src)
	}
}

// A copy its replica did not sign is refused, however consistent its
// chain and right its length: the poll stays pending, the reason and the
// log name the copy's holder, and no forged number is certified. The
// same copy with the replica's head certifies (TestACopySignedByItsReplicaCertifies).
func TestAForgedCopyIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		copy func(r *copyRig) ([]ledger.Record, *ledger.SignedHead)
		why  string
	}{
		{"unsigned", func(r *copyRig) ([]ledger.Record, *ledger.SignedHead) { return r.forged(), nil },
			"no chain head signed by us-1"},
		{"signed with another member's key", func(r *copyRig) ([]ledger.Record, *ledger.SignedHead) {
			f := r.forged()
			return f, r.signed("ap-1", f)
		}, "not by us-1's key"},
		{"the genuine chain signed with another member's key", func(r *copyRig) ([]ledger.Record, *ledger.SignedHead) {
			return r.chain, r.signed("ap-1", r.chain)
		}, "not by us-1's key"},
		{"the replica's genuine head on a forged chain", func(r *copyRig) ([]ledger.Record, *ledger.SignedHead) {
			return r.forged(), r.signed("us-1", r.chain)
		}, "no chain head signed by us-1"},
		{"a forged record before the replica's head of six", func(r *copyRig) ([]ledger.Record, *ledger.SignedHead) {
			// The genuine first six and their head, served after a seventh
			// record forged to follow them: the head is not the last
			// record's, and the reader refuses it.
			f := append([]ledger.Record(nil), r.chain[:6]...)
			extra := r.forged()[6]
			extra.Prev = f[5].Hash()
			return append(f, extra), r.signed("us-1", r.chain[:6])
		}, "no chain head signed by us-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newCopyRig(t)
			r.serveCopy(tc.copy(r))
			cert, err := r.c.Certify(context.Background(), "p", Decisions{})
			if !errors.Is(err, ErrIncomplete) || cert.Status != state.Pending || cert.Total != 0 {
				t.Fatalf("a forged copy: %s %v (%s) %v, want pending", cert.Status, cert.Totals, cert.Reason, err)
			}
			for _, want := range []string{"us-1", "the copy held by ap-1", tc.why} {
				if !strings.Contains(cert.Reason, want) {
					t.Errorf("pending reason %q does not say %q", cert.Reason, want)
				}
			}
			if log := r.logged.String(); !strings.Contains(log, "holder=ap-1") || !strings.Contains(log, "did not sign") {
				t.Errorf("the log does not name the holder of the refused copy:\n%s", log)
			}
		})
	}
}

// A holder that hands over the replica's signed copy when asked for its
// length, then a forged one when the chain is collected, is refused at
// collection: the head is checked on the records certified.
func TestACopyForgedAfterItsLengthIsRefused(t *testing.T) {
	r := newCopyRig(t)
	genuine, forged := streamOf(r.chain, r.signed("us-1", r.chain)), streamOf(r.forged(), nil)
	f := func(uint64) []byte {
		if r.reads.Load() == 1 {
			return genuine
		}
		return forged
	}
	r.serve.Store(&f)
	cert, err := r.c.Certify(context.Background(), "p", Decisions{})
	if !errors.Is(err, ErrIncomplete) || cert.Status != state.Pending || !strings.Contains(cert.Reason, "the copy held by ap-1") {
		t.Fatalf("%s %v (%s) %v, want pending naming ap-1", cert.Status, cert.Totals, cert.Reason, err)
	}
	if r.reads.Load() < 2 {
		t.Fatalf("the copy was read %d times", r.reads.Load())
	}
}

// A certifier that does not know the key the lost replica signs with
// cannot check its copy, and says so rather than certify it.
func TestACopyOfAReplicaOfUnknownKeyIsPending(t *testing.T) {
	r := newCopyRigKnowing(t, "eu-1", "ap-1")
	cert, err := r.c.Certify(context.Background(), "p", Decisions{})
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(cert.Reason, "the key us-1 signs with is not known here") ||
		!strings.Contains(cert.Reason, "the copy held by ap-1") {
		t.Fatalf("%s %v (%s) %v", cert.Status, cert.Totals, cert.Reason, err)
	}
}

// A copy that breaks off in the middle when its chain is collected (after
// its holder handed over the signed copy for its length) leaves the poll
// pending with the holder named, as a refused copy does.
func TestACopyBrokenAtCollectionNamesItsHolder(t *testing.T) {
	r := newCopyRig(t)
	genuine := streamOf(r.chain, r.signed("us-1", r.chain))
	f := func(uint64) []byte {
		if r.reads.Load() == 1 {
			return genuine
		}
		return genuine[:len(genuine)-200] // inside the last records
	}
	r.serve.Store(&f)
	cert, err := r.c.Certify(context.Background(), "p", Decisions{})
	if !errors.Is(err, ErrIncomplete) || cert.Status != state.Pending || !strings.Contains(cert.Reason, "the copy held by ap-1") {
		t.Fatalf("%s %v (%s) %v, want pending naming ap-1", cert.Status, cert.Totals, cert.Reason, err)
	}
}
