package api

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The socket ack written by hand decodes to the same value as the
// SocketReply encoding/json writes, for any ref and results (its bytes
// differ: no HTML escaping, stamp before elapsed_ms), and costs no
// allocation in a reused buffer.
func TestAppendSocketAckIsTheSocketReply(t *testing.T) {
	elapsed := int64(1234)
	for _, c := range []struct {
		ref string
		v   VoteResponse
	}{
		{"r1", VoteResponse{Results: []VoteResult{{Idem: "k", Status: StatusAccepted, VoteID: "eu-west-1a2b/7", Stamp: "1764500068123.2"}}, ServerTime: 1764500068123}},
		{"", VoteResponse{Results: []VoteResult{{Idem: "a\"b\\c\u2028", Status: StatusRejected, Error: "bad \n option"}}, ServerTime: 1}},
		{"ref with \x01 control", VoteResponse{Results: []VoteResult{{Idem: "k1", Status: StatusDuplicate, VoteID: "x/1"}, {Idem: "k2", Status: StatusAccepted, ElapsedMs: &elapsed}}}},
		{"<a&b>\b\f", VoteResponse{Results: []VoteResult{{Idem: "q<1>&", Status: StatusAccepted, VoteID: "x/2", Stamp: "1.2", ElapsedMs: &elapsed}}, ServerTime: 7}},
	} {
		want, err := json.Marshal(SocketReply{Type: TypeAck, Ref: c.ref, Result: c.v})
		if err != nil {
			t.Fatal(err)
		}
		got := AppendSocketAck(nil, c.ref, c.v)
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
	v := VoteResponse{Results: []VoteResult{{Idem: "k", Status: StatusAccepted, VoteID: "eu-west-1a2b/7", Stamp: "1764500068123.2"}}, ServerTime: 1}
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { buf = AppendSocketAck(buf[:0], "r1", v) }); n != 0 {
		t.Fatalf("%v allocations per socket ack, want 0", n)
	}
}
