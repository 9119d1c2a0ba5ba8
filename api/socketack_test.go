package api

import (
	"encoding/json"
	"testing"
)

// The socket ack written by hand is the SocketReply encoding/json writes,
// for any ref and results, and costs no allocation in a reused buffer.
func TestAppendSocketAckIsTheSocketReply(t *testing.T) {
	elapsed := int64(1234)
	for _, c := range []struct {
		ref string
		v   VoteResponse
	}{
		{"r1", VoteResponse{Results: []VoteResult{{Idem: "k", Status: StatusAccepted, VoteID: "eu-west-1a2b/7", Stamp: "1764500068123.2"}}, ServerTime: 1764500068123}},
		{"", VoteResponse{Results: []VoteResult{{Idem: "a\"b\\c\u2028", Status: StatusRejected, Error: "bad \n option"}}, ServerTime: 1}},
		{"ref with \x01 control", VoteResponse{Results: []VoteResult{{Idem: "k1", Status: StatusDuplicate, VoteID: "x/1"}, {Idem: "k2", Status: StatusAccepted, ElapsedMs: &elapsed}}}},
	} {
		want, err := json.Marshal(SocketReply{Type: TypeAck, Ref: c.ref, Result: c.v})
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendSocketAck(nil, c.ref, c.v); string(got) != string(want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
	v := VoteResponse{Results: []VoteResult{{Idem: "k", Status: StatusAccepted, VoteID: "eu-west-1a2b/7", Stamp: "1764500068123.2"}}, ServerTime: 1}
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { buf = AppendSocketAck(buf[:0], "r1", v) }); n != 0 {
		t.Fatalf("%v allocations per socket ack, want 0", n)
	}
}
