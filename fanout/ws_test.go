package fanout

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"tally/api"
	"tally/hlc"
	"tally/poll"
	"tally/state"
)

// echoVoter acknowledges every vote body it is given, or refuses "bad".
type echoVoter struct{}

func (echoVoter) Vote(poll string, body []byte, _ api.Sender) (api.VoteResponse, error) {
	if strings.Contains(string(body), "bad") {
		return api.VoteResponse{}, api.Errorf(http.StatusUnprocessableEntity, api.CodeInvalidOption, "no such option")
	}
	return api.VoteResponse{Results: []api.VoteResult{{Idem: poll + " " + string(body), Status: api.StatusAccepted}}}, nil
}

func serve(t testing.TB, st *state.State, mutate func(*Config)) (*Server, *httptest.Server) {
	t.Helper()
	s := newServer(t, st, func(c *Config) {
		c.Voter = echoVoter{}
		c.Tick = 20 * time.Millisecond
		if mutate != nil {
			mutate(c)
		}
	})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/polls/{poll}/live", s.HandleLive)
	mux.HandleFunc("GET /v1/polls/{poll}/events", s.HandleEvents)
	mux.HandleFunc("GET /v1/quizzes/{quiz}/live", s.HandleQuizLive)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { s.Close(); srv.Close() })
	return s, srv
}

func dial(t *testing.T, srv *httptest.Server, poll string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/polls/"+poll+"/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func readMsg(t *testing.T, c *websocket.Conn) Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWebSocketStream(t *testing.T) {
	st := newState(t)
	s, srv := serve(t, st, nil)
	c := dial(t, srv, "p")
	snap := readMsg(t, c)
	if snap.Type != TypeSnapshot || snap.Poll != "p" || len(snap.Totals) != 2 || len(snap.Options) != 2 || snap.Status != "open" {
		t.Fatalf("first message: %+v", snap)
	}
	st.Count("p", "a", 2)
	diff := readMsg(t, c)
	if diff.Type != TypeDiff || diff.Seq != snap.Seq+1 || diff.Totals["a"] != 2 || len(diff.Totals) != 1 || diff.Total != 2 {
		t.Fatalf("diff: %+v", diff)
	}
	// A vote on the socket is acknowledged on the socket.
	ctx := context.Background()
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"vote","ref":"r1","body":{"option":"a","voter":"v","idem":"k"}}`))
	_, b, err := c.Read(ctx)
	if err != nil || !strings.Contains(string(b), `"type":"ack"`) || !strings.Contains(string(b), `"ref":"r1"`) {
		t.Fatalf("ack: %s %v", b, err)
	}
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"vote","ref":"r2","body":{"option":"bad"}}`))
	_, b, _ = c.Read(ctx)
	if !strings.Contains(string(b), `"code":"invalid_option"`) {
		t.Fatalf("refusal: %s", b)
	}
	// A client that saw a gap asks for a snapshot.
	c.Write(ctx, websocket.MessageText, []byte(`{"type":"resync"}`))
	if m := readMsg(t, c); m.Type != TypeSnapshot || m.Totals["a"] != 2 {
		t.Fatalf("resync: %+v", m)
	}
	c.Close(websocket.StatusNormalClosure, "")
	waitUntil(t, func() bool { return s.Viewers() == 0 })
}

func TestWebSocketHostileInput(t *testing.T) {
	st := newState(t)
	_, srv := serve(t, st, func(c *Config) { c.MaxInbound = 256; c.InboundPerSec = 5 })
	cases := map[string][]string{
		"oversized":     {`{"type":"vote","body":"` + strings.Repeat("x", 1000) + `"}`},
		"not json":      {"hello"},
		"unknown type":  {`{"type":"admin"}`},
		"unknown field": {`{"type":"resync","x":1}`},
		"flood":         strings.Split(strings.Repeat(`{"type":"resync"};`, 40), ";")[:40],
	}
	for name, msgs := range cases {
		t.Run(name, func(t *testing.T) {
			c := dial(t, srv, "p")
			readMsg(t, c)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for _, m := range msgs {
				if err := c.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
					break
				}
			}
			for {
				_, _, err := c.Read(ctx)
				if err == nil {
					continue // snapshots answering resyncs
				}
				if got := websocket.CloseStatus(err); got != websocket.StatusPolicyViolation {
					t.Fatalf("closed with %v (%v), want policy violation", got, err)
				}
				return
			}
		})
	}
	// The server is still up.
	c := dial(t, srv, "p")
	if m := readMsg(t, c); m.Type != TypeSnapshot {
		t.Fatalf("after abuse: %+v", m)
	}
}

func TestWebSocketRefusals(t *testing.T) {
	st := newState(t)
	_, srv := serve(t, st, nil)
	res, err := http.Get(srv.URL + "/v1/polls/nope/live")
	if err != nil || res.StatusCode != 404 {
		t.Fatalf("unknown poll: %v %v", res, err)
	}
	res.Body.Close()
	// A page from another origin may not open the stream.
	ctx := context.Background()
	_, _, err = websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/polls/p/live",
		&websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
	if err == nil {
		t.Fatal("cross-origin socket accepted")
	}
	req, _ := http.NewRequest("GET", srv.URL+"/v1/polls/p/events", nil)
	req.Header.Set("Origin", "https://evil.example")
	res, err = http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 403 {
		t.Fatalf("cross-origin SSE: %v %v", res.StatusCode, err)
	}
	res.Body.Close()
}

func TestServerSentEvents(t *testing.T) {
	st := newState(t)
	s, srv := serve(t, st, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/polls/p/events", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%v %v", res, err)
	}
	defer res.Body.Close()
	lines := bufio.NewScanner(res.Body)
	next := func() Message {
		for lines.Scan() {
			if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
				var m Message
				if err := json.Unmarshal([]byte(data), &m); err != nil {
					t.Fatal(err)
				}
				return m
			}
		}
		t.Fatal("stream ended")
		return Message{}
	}
	if m := next(); m.Type != TypeSnapshot {
		t.Fatalf("first event %+v", m)
	}
	st.Count("p", "b", 1)
	if m := next(); m.Type != TypeDiff || m.Totals["b"] != 1 {
		t.Fatalf("diff event %+v", m)
	}
	cancel()
	waitUntil(t, func() bool { return s.Viewers() == 0 })
}

// recordingVoter records the Sender of every vote it is given, and the
// polls voted on.
type recordingVoter struct {
	mu    sync.Mutex
	last  api.Sender
	votes int
	polls map[string]int
}

func (r *recordingVoter) Vote(poll string, _ []byte, s api.Sender) (api.VoteResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.votes = s, r.votes+1
	if r.polls == nil {
		r.polls = map[string]int{}
	}
	r.polls[poll]++
	return api.VoteResponse{Results: []api.VoteResult{{Status: api.StatusAccepted}}}, nil
}

func (r *recordingVoter) get() (api.Sender, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.votes
}

// A quiz question's socket tells the voter when this server put the open
// question on it (by the server's clock) and the socket's measured round
// trip; a poll's socket is neither timed nor pinged.
func TestQuizSocketReportsShownTimeAndRoundTrip(t *testing.T) {
	st := newState(t)
	def := poll.Definition{ID: "q", Question: "2+2?", Options: []poll.Option{{ID: "a", Label: "3"}, {ID: "b", Label: "4"}},
		OpensAt: time.Now().Add(-time.Second).UnixMilli(), ClosesAt: time.Now().Add(time.Minute).UnixMilli(),
		Quiz: &poll.QuizQuestion{Quiz: "z", Correct: []string{"b"}, Points: 1000, LimitMs: 60_000, Started: true}}
	if _, err := st.Defs.PutPoll(def, hlc.Timestamp{Wall: 2, Replica: "eu-1"}); err != nil {
		t.Fatal(err)
	}
	rec := &recordingVoter{}
	shown := time.Now() // the server's clock stands still at it
	_, srv := serve(t, st, func(c *Config) { c.Voter = rec; c.Now = func() time.Time { return shown } })
	for _, id := range []string{"q", "p"} {
		c := dial(t, srv, id)
		if m := readMsg(t, c); m.Status != "open" {
			t.Fatalf("%s: first frame %+v", id, m)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		go func() { // the reader answers the server's pings
			for {
				if _, _, err := c.Read(ctx); err != nil {
					return
				}
			}
		}()
		// Vote until a vote carries the round trip (the first ping may
		// still be on its way), or, for the poll, once.
		var last api.Sender
		waitUntil(t, func() bool {
			_, before := rec.get()
			c.Write(ctx, websocket.MessageText, []byte(`{"type":"vote","ref":"r","body":{"option":"b","voter":"v","idem":"k"}}`))
			waitUntil(t, func() bool { _, n := rec.get(); return n > before })
			last, _ = rec.get()
			return id == "p" || last.RTTMs >= 0
		})
		want := shown.UnixMilli()
		if id == "p" {
			want = 0 // a poll's vote is not timed
		}
		if last.ShownMs != want {
			t.Fatalf("%s: shown at %d, want %d", id, last.ShownMs, want)
		}
		if last.ReceivedMs != shown.UnixMilli() { // read off the socket by the server's clock
			t.Fatalf("%s: received at %d, want %d", id, last.ReceivedMs, shown.UnixMilli())
		}
		if id == "p" && last.RTTMs != -1 {
			t.Fatalf("a poll's socket was pinged: %d", last.RTTMs)
		}
	}
}
