package fanout

import (
	"bytes"
	"context"
	"testing"

	"tally/api"
	"tally/internal/race"
)

// discard is a sender that writes nowhere: what a frame write costs
// above the socket's own write.
type discard struct{}

func (discard) send(context.Context, []byte) error { return nil }
func (discard) close(string)                       {}

// Writing a frame to a viewer — taking its pending frame, the write, the
// count — allocates nothing: the frame's bytes are the hub's, shared by
// every viewer (issue 61).
func TestFrameWriteAllocatesNothing(t *testing.T) {
	s := newServer(t, newState(t), nil)
	v, err := s.join("p", "ip", "test", discard{})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { v.mu.Lock(); defer v.mu.Unlock(); return v.lastSeq > 0 && !v.busy && !v.queued })
	body := []byte(`{"type":"diff","seq":2,"totals":{"a":1}}`)
	frames := make([]*frame, 200)
	v.mu.Lock()
	seq := v.lastSeq
	v.mu.Unlock()
	for i := range frames {
		frames[i] = &frame{seq: seq + uint64(i) + 1, snapshot: body, diff: body}
	}
	i := 0
	if n := testing.AllocsPerRun(100, func() {
		v.offer(frames[i])
		i++
		s.writeFrame(v)
	}); n != 0 {
		t.Fatalf("%v allocations per frame written, want 0", n)
	}
	if v.lastSeq != frames[i-1].seq {
		t.Fatalf("the viewer is at seq %d, want %d: the frames were not written", v.lastSeq, frames[i-1].seq)
	}
}

// A vote sent on a socket is decoded with a bounded number of
// allocations (its strings and the vote's raw body), and its answer is
// encoded with none (api.AppendSocketAck).
func TestSocketVoteDecodeAllocations(t *testing.T) {
	msg := []byte(`{"type":"vote","ref":"r17","body":{"option":"a","voter":"0f8fad5b-d9cb-469f-a165-70867728950e","idem":"7c9e6679-7425-40de-944b-e07fc1f90ae7"}}`)
	var in inbound
	n := testing.AllocsPerRun(200, func() {
		in = inbound{}
		if err := api.Unmarshal(msg, &in); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%v allocations per socket vote decoded", n)
	if in.Type != "vote" || in.Ref != "r17" || len(in.Body) == 0 {
		t.Fatalf("decoded %+v", in)
	}
	most := 2.0 // 1 measured with go-json-experiment (2026-12): a margin for its next version
	if race.Enabled {
		// 3 to 5 under the race detector, which drops sync.Pool items at
		// random (the decoder's pools): a bound with room, still far
		// below a decode that allocates per field.
		most = 10
	}
	if n > most {
		t.Fatalf("%v allocations per socket vote decoded, want at most %v", n, most)
	}
}

// A socket's messages are read into one buffer, reused: reading a vote
// allocates nothing once the buffer has grown (io.ReadAll allocated one
// per message), and a buffer grown past keepReadBuffer by one large
// message is let go rather than held for the socket's life.
func TestSocketReadReusesItsBuffer(t *testing.T) {
	msg := []byte(`{"type":"vote","ref":"r17","body":{"option":"a","voter":"v","idem":"k"}}`)
	var buf []byte
	rd := bytes.NewReader(msg)
	read := func() {
		rd.Reset(msg)
		data, err := readMessage(rd, buf[:0], 4097)
		if err != nil || !bytes.Equal(data, msg) {
			t.Fatalf("read %q, %v", data, err)
		}
		buf = keep(data)
	}
	read()
	if n := testing.AllocsPerRun(100, read); n != 0 {
		t.Fatalf("%v allocations per message read, want 0", n)
	}
	big := bytes.Repeat([]byte(" "), 4000)
	data, err := readMessage(bytes.NewReader(big), buf[:0], 4097)
	if err != nil || len(data) != len(big) {
		t.Fatalf("read %d bytes, %v", len(data), err)
	}
	if kept := keep(data); kept != nil {
		t.Fatalf("a %d-byte buffer kept after a large message", cap(kept))
	}
}
