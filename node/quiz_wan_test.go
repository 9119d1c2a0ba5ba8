package node

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"tally/gossip/gossiptest"
	"tally/quiz"
)

// runClock follows real time from a common start until frozen; then the
// test moves it.
type runClock struct {
	mu     sync.Mutex
	base   time.Time // what it read at start
	start  time.Time // real time at start
	frozen bool
	at     time.Time
}

func (c *runClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen {
		return c.at
	}
	return c.base.Add(time.Since(c.start))
}

// freeze stops the clock where it is and returns that reading.
func (c *runClock) freeze() time.Time {
	at := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen, c.at = true, at
	return at
}

func (c *runClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
}

// Three regions whose every gossip message and stream write is held
// 100 ms (gossiptest.Delay; NATS between regions is off, so memberlist is
// the only path), their clocks running in step with real time: the
// question reaches the other two regions at least 100 ms after the host's
// region opened it. Each participant answers 1.5 s (by their node's clock)
// after their own question frame arrived. Every answer is timed from the
// node's own frame: between 1,500 ms and 1,500 ms plus that frame's own
// trip from the node's tick to the participant — never the 100 ms or more
// that the question took to cross to their region. The certified answers
// carry the same times.
func TestQuizIsFairAcrossRegionsWithWANDelay(t *testing.T) {
	t.Parallel()
	const delay = 100 * time.Millisecond
	start, base := time.Now(), time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clocks := []*runClock{{base: base, start: start}, {base: base, start: start}, {base: base, start: start}}
	wan := gossiptest.Delay{D: delay}
	nodes := startCluster(t, []string{"eu-west", "us-east", "ap-south"}, func(i int, c *Config) {
		c.Now = clocks[i].now
		c.WrapGossip = wan.Wrap
		c.GossipProfile = "lan" // probes wait 500 ms: over the 200 ms round trip (wan's 3 s outlive the test)
		c.NATSClusterAddr, c.NATSGatewayAddr, c.NATSLeafAddr = "", "", ""
	})
	if r := nodes[0].admin(t, "POST", "/v1/quizzes", pubQuiz); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	havePoll(t, nodes, "pub-3")
	type seat struct {
		ws      *websocket.Conn
		frameAt int64 // the question frame's as_of_ms: the node's tick
		gotAt   int64 // the node's clock when the participant had it (then frozen)
		elapsed int64
		score   int64
	}
	seats := make([]*seat, len(nodes))
	for i, n := range nodes {
		ws, ctx := dialQuiz(t, n, "pub")
		frameUntil(t, ctx, ws, func(m map[string]any) bool { return m["type"] == "quiz" })
		seats[i] = &seat{ws: ws}
	}
	r, _ := nodes[0].quiz(t, "POST", "/v1/quizzes/pub/start", true)
	if r.status != 200 {
		t.Fatalf("start: %d %s", r.status, r.raw)
	}
	opened := int64(r.body["questions"].([]any)[0].(map[string]any)["opens_at"].(float64))

	var wg sync.WaitGroup
	errs := make(chan string, len(nodes))
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := seats[i]
			ctx := t.Context()
			for { // the first frame with the question open: freeze this region's clock on it
				_, data, err := s.ws.Read(ctx)
				if err != nil {
					errs <- n.cfg.Region + ": " + err.Error()
					return
				}
				var m map[string]any
				json.Unmarshal(data, &m)
				if m["type"] == "quiz" && m["status"] == "question" {
					s.gotAt = clocks[i].freeze().UnixMilli()
					s.frameAt = int64(m["as_of_ms"].(float64))
					break
				}
			}
			clocks[i].advance(1500 * time.Millisecond)
			voter := "p-" + n.cfg.Region
			s.ws.Write(ctx, websocket.MessageText, []byte(`{"type":"vote","ref":"r","poll":"pub-1","body":{"option":"b","voter":"`+voter+`","idem":"`+voter+`"}}`))
			for {
				_, data, err := s.ws.Read(ctx)
				if err != nil {
					errs <- n.cfg.Region + ": " + err.Error()
					return
				}
				var ack struct {
					Type   string
					Result struct {
						Results []struct {
							ElapsedMs int64 `json:"elapsed_ms"`
						}
					}
					Error any
				}
				json.Unmarshal(data, &ack)
				if ack.Type == "error" || ack.Type == "ack" && len(ack.Result.Results) != 1 {
					errs <- n.cfg.Region + ": " + string(data)
					return
				}
				if ack.Type == "ack" {
					s.elapsed = ack.Result.Results[0].ElapsedMs
					s.score = quiz.Score(true, 1000, s.elapsed, 20_000)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	for i, s := range seats {
		region := nodes[i].cfg.Region
		t.Logf("%s: question frame %d ms after the host opened it, in the participant's hands %d ms after that; answer timed %d ms, %d points (timed from the host's opening: %d ms)",
			region, s.frameAt-opened, s.gotAt-s.frameAt, s.elapsed, s.score, s.elapsed+s.frameAt-opened)
		if i > 0 && s.frameAt-opened < delay.Milliseconds() {
			t.Errorf("%s had the question %d ms after the opening: the injected delay did not apply", region, s.frameAt-opened)
		}
		// Timed from this node's frame to this participant: written after
		// the tick that encoded it and before the participant had it —
		// unless that was later than the opening plus quiz.AllowanceMs
		// (a slow machine, a far region), where the clock starts instead.
		answered := s.gotAt + 1500
		low := answered - min(s.gotAt, opened+quiz.AllowanceMs)
		high := answered - min(s.frameAt, opened+quiz.AllowanceMs)
		if s.elapsed < low || s.elapsed > high {
			t.Errorf("%s: answer timed %d ms; want %d to %d ms (the frame left %d to 0 ms before the participant had it, the allowance ends %d ms after the opening)",
				region, s.elapsed, low, high, s.gotAt-s.frameAt, quiz.AllowanceMs)
		}
	}
	// The certified answers carry the times the acks gave.
	nodes[0].admin(t, "POST", "/v1/quizzes/pub/reveal", "")
	for _, c := range clocks {
		c.advance(25 * time.Second)
	}
	v := certifiedEverywhere(t, nodes, "pub-1")
	got := map[int64]int{}
	for _, a := range v.Detail.Result.Answers {
		got[a.ElapsedMs]++
	}
	for _, s := range seats {
		if got[s.elapsed]--; got[s.elapsed] < 0 {
			t.Errorf("certified answers %+v lack one timed %d ms", v.Detail.Result.Answers, s.elapsed)
		}
	}
	if len(v.Detail.Result.Answers) != len(seats) {
		t.Fatalf("certified %d answers", len(v.Detail.Result.Answers))
	}
}
