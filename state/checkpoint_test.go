package state

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"tally/crdt"
	"tally/hlc"
)

// checkpointed returns a state with poll "p" and five of this replica's
// votes, its checkpoint, and the chain heads it was taken at.
func checkpointed(t testing.TB) (*State, []byte, Heads) {
	t.Helper()
	s := newState(t, "eu-1")
	if _, err := s.Defs.PutPoll(def("p"), hlc.Timestamp{Wall: 1, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := s.Vote("p", crdt.Ballot{Seq: uint64(i + 1), Wall: int64(100 + i), Voter: uint64(i), Idem: uint64(1000 + i), Option: "red", Eligible: true}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddRecords("p", 1); err != nil {
			t.Fatal(err)
		}
	}
	heads := func(string) (uint64, error) { return 5, nil }
	cp, err := s.Snapshot(heads)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if polls, ballots, err := cp.Write(&buf); err != nil || polls != 1 || ballots != 5 {
		t.Fatalf("Write: %d polls, %d ballots, %v", polls, ballots, err)
	}
	return s, buf.Bytes(), heads
}

// fresh is a restarted node's state: the same definition, nothing counted.
func fresh(t testing.TB) *State {
	t.Helper()
	s := newState(t, "eu-1")
	if _, err := s.Defs.PutPoll(def("p"), hlc.Timestamp{Wall: 1, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCheckpointRoundTrip(t *testing.T) {
	s, b, heads := checkpointed(t)
	r := fresh(t)
	applied, err := r.LoadCheckpoint(bytes.NewReader(b), heads)
	if err != nil || applied["p"] != 5 {
		t.Fatalf("LoadCheckpoint: %v %v", applied, err)
	}
	wantCounts, wantRecords, _ := s.OwnCounts("p")
	gotCounts, gotRecords, _ := r.OwnCounts("p")
	if fmt.Sprint(gotCounts) != fmt.Sprint(wantCounts) || gotRecords != wantRecords {
		t.Fatalf("restored %v/%d, want %v/%d", gotCounts, gotRecords, wantCounts, wantRecords)
	}
	want, _, _ := s.SnapshotBallots("p")
	got, _, _ := r.SnapshotBallots("p")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored ballots %v, want %v", got, want)
	}
}

func TestCheckpointRefusals(t *testing.T) {
	_, good, heads := checkpointed(t)
	flip := append([]byte(nil), good...)
	flip[len(checkpointMagic)+3] ^= 1
	extra := append(append([]byte(nil), good[:len(good)-32]...), 0)
	cases := map[string]struct {
		b     []byte
		heads Heads
		want  error
	}{
		"empty":            {nil, heads, ErrCheckpoint}, // unusable: the node replays the whole ledger
		"not a checkpoint": {[]byte("hello"), heads, ErrCheckpoint},
		"magic only":       {[]byte(checkpointMagic), heads, ErrCheckpoint},
		"truncated":        {good[:len(good)-10], heads, ErrCheckpoint},
		"bit flipped":      {flip, heads, ErrCheckpoint},
		"trailing byte":    {extra, heads, ErrCheckpoint},
		// Acknowledged records are gone: the node refuses to start.
		"ahead of ledger": {good, func(string) (uint64, error) { return 2, nil }, ErrLedgerBehind},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := fresh(t)
			if _, err := r.LoadCheckpoint(bytes.NewReader(c.b), c.heads); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if counts, records, _ := r.OwnCounts("p"); records != 0 || counts["red"][0] != 0 {
				t.Fatal("a refused checkpoint changed the state")
			}
		})
	}
	// A checkpoint naming a poll this node does not know is refused too.
	if _, err := newState(t, "eu-1").LoadCheckpoint(bytes.NewReader(good), heads); !errors.Is(err, ErrCheckpoint) {
		t.Fatalf("unknown poll: %v", err)
	}
}

// FuzzLoadCheckpoint: any bytes are refused or loaded, never a panic, and
// a refused checkpoint changes nothing.
func FuzzLoadCheckpoint(f *testing.F) {
	_, good, _ := checkpointed(f)
	f.Add(good)
	f.Add([]byte(checkpointMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := fresh(t)
		if _, err := r.LoadCheckpoint(bytes.NewReader(b), func(string) (uint64, error) { return 1 << 40, nil }); err != nil {
			if _, records, _ := r.OwnCounts("p"); records != 0 {
				t.Fatalf("refused (%v) but counted %d records", err, records)
			}
		}
	})
}
