package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"tally/api"
)

// dialBare opens a socket on a bare socket reader (--store none).
func dialBare(t *testing.T, maxFrame int) (*websocket.Conn, context.Context) {
	t.Helper()
	var seq atomic.Uint64
	s := &sockets{store: "none", vote: func(context.Context, string, string, string) error { return nil }, seq: &seq, maxFrame: maxFrame, max: 10}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/polls/{poll}/live", s.serve)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/polls/p/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c, ctx
}

func TestSocketAck(t *testing.T) {
	c, ctx := dialBare(t, 64<<10)
	msg := `{"type":"vote","ref":"7\"q","body":{"votes":[{"option":"red","voter":"v1","idem":"k1"},{"option":"blue","voter":"v2","idem":"k\u00e92","after":"1.0"}]}}`
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		api.SocketReply
		Result api.VoteResponse `json:"result"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if r.Type != api.TypeAck || r.Ref != `7"q` || len(r.Result.Results) != 2 || r.Result.Results[1].Idem != "ké2" ||
		r.Result.Results[0].Status != api.StatusAccepted || r.Result.Results[1].VoteID != "none/2" || r.Result.Results[0].Stamp == "" {
		t.Fatalf("ack %s", b)
	}
	if !strings.HasPrefix(string(b), `{"type":"ack","ref":"7\"q"`) {
		t.Fatalf("tally load wants the ref first: %s", b)
	}
	// A refused vote gets an error reply.
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"vote","ref":"8","body":{"votes":[]}}`))
	if _, b, err = c.Read(ctx); err != nil || !strings.Contains(string(b), `"type":"error","ref":"8"`) {
		t.Fatalf("%s %v", b, err)
	}
	// A message in three frames.
	w, err := c.Writer(ctx, websocket.MessageText)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{`{"type":"vote","ref":"9",`, `"body":{"option":"red","voter":"v3",`, `"idem":"k3"}}`} {
		w.Write([]byte(part)) // each Write is a frame
	}
	w.Close()
	if _, b, err = c.Read(ctx); err != nil || !strings.Contains(string(b), `"ref":"9","result":{"results":[{"idem":"k3","status":"accepted"`) {
		t.Fatalf("%s %v", b, err)
	}
	// A ping is answered (Ping waits for the pong, which CloseRead reads).
	ctx = c.CloseRead(ctx)
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
}

func TestSocketRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		typ  websocket.MessageType
		msg  string
		code websocket.StatusCode
	}{
		"too large":    {websocket.MessageText, `{"type":"vote","ref":"1","body":{"option":"` + strings.Repeat("r", 200) + `"}}`, websocket.StatusMessageTooBig},
		"not JSON":     {websocket.MessageText, `vote`, websocket.StatusPolicyViolation},
		"unknown type": {websocket.MessageText, `{"type":"hello"}`, websocket.StatusPolicyViolation},
		"binary":       {websocket.MessageBinary, `{}`, websocket.StatusUnsupportedData},
	} {
		t.Run(name, func(t *testing.T) {
			c, ctx := dialBare(t, 128)
			c.Write(ctx, tc.typ, []byte(tc.msg))
			if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != tc.code {
				t.Fatalf("got %v, want close %d", err, tc.code)
			}
		})
	}
}

// discard is a connection whose writes go nowhere.
type discard struct{ net.Conn }

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// BenchmarkHandle is one message as tally load sends it, decoded and
// acknowledged: the allocations are the decoder's.
func BenchmarkHandle(b *testing.B) {
	var seq atomic.Uint64
	s := &sockets{store: "none", vote: func(context.Context, string, string, string) error { return nil }, seq: &seq, maxFrame: 64 << 10, max: 1}
	c := &sock{s: s, conn: discard{}, ctx: context.Background(), poll: "p", out: make([]byte, maxHeader, 512)}
	msg := []byte(`{"type":"vote","ref":"12","body":{"votes":[{"option":"red","voter":"sock-12-48213","idem":"sock18b2c3d4e5f6a7b8-12-34-0-48213","after":"1765000000000.0"}]}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.handle(msg); err != nil {
			b.Fatal(err)
		}
	}
}
