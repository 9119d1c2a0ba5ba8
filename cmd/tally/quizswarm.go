package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

const quizSwarmHelp = `usage: tally quiz swarm --quiz ID --participants N [flags]

The thundering herd of a quiz question, from the participants' side: N
participants each open the quiz's stream (GET /v1/quizzes/{quiz}/live, from
many loopback source addresses), say who they are, and wait. When the host
starts a question, each answers it on its socket a random moment within
--within of receiving the question's frame, and waits for its
acknowledgement; then each waits for its own standing, which the node sends
once the question is certified and revealed. It stops when every
participant has its standing, or at --timeout, and reports:

  - the question frame's arrival (from the question's opening at the node);
  - the acknowledgements: count, latency percentiles, refusals by code;
  - the time the node measured against the participant's own delay (the
    node's timing overhead, frame write to answer read);
  - the standings: how many arrived, and when, from the question's close
    frame.

Progress goes to stderr ("connected N/N" once the swarm is in).
`

func quizSwarm(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("tally quiz swarm", "tally quiz swarm --quiz ID --participants N [flags]")
	fs.Usage = func() { fmt.Fprint(fs.Output(), quizSwarmHelp+"\nflags:\n"); printDefaults(fs) }
	var base string
	urlVar(fs, &base, urlUsage)
	id := fs.String("quiz", "", "quiz id")
	n := fs.Int("participants", 1000, "participants, one socket each")
	perIP := fs.Int("per-ip", 1000, "participants per loopback source address (127.0.0.2, .3, …)")
	ramp := fs.Duration("ramp", 10*time.Second, "time to connect the swarm")
	within := fs.Duration("within", 2*time.Second, "each answers at a random moment this long after its question frame")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up waiting for the question or the standings after this")
	prefix := fs.String("prefix", "herd", "participants' voter ids are PREFIX-0, PREFIX-1, …: give each swarm its own")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *id == "" || *n < 1 || *perIP < 1 || *within < 0 || fs.NArg() != 0 {
		return usageError(fs, stderr, "--quiz is required; --participants and --per-ip at least 1, --within not negative")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	base, _ = resolveURL(base)
	rep, err := runQuizSwarm(ctx, quizSwarmConfig{url: base, quiz: *id, prefix: *prefix, participants: *n, perIP: *perIP, ramp: *ramp, within: *within, progress: stderr})
	if err != nil {
		fmt.Fprintf(stderr, "tally quiz swarm: %v\n", err)
		return 1
	}
	return printReport(stdout, *asJSON, rep)
}

type quizSwarmConfig struct {
	url, quiz, prefix   string
	participants, perIP int
	ramp, within        time.Duration
	progress            io.Writer
}

// quizSwarmReport is what a quiz swarm measured.
type quizSwarmReport struct {
	Participants int `json:"participants"`
	Connected    int `json:"connected"`
	// The question frame: how many got it, and when, from its opening.
	QuestionFrames int     `json:"question_frames"`
	FrameP50Ms     float64 `json:"frame_p50_ms"`
	FrameP99Ms     float64 `json:"frame_p99_ms"`
	FrameMaxMs     float64 `json:"frame_max_ms"`
	// The answers and their acknowledgements.
	Answered  int            `json:"answered"`
	Acked     int            `json:"acked"`
	Refused   map[string]int `json:"refused,omitempty"` // error code → count
	AckP50Ms  float64        `json:"ack_p50_ms"`
	AckP99Ms  float64        `json:"ack_p99_ms"`
	AckP999Ms float64        `json:"ack_p999_ms"`
	AckMaxMs  float64        `json:"ack_max_ms"`
	// The node's measured time minus the participant's own delay.
	OverheadP50Ms float64 `json:"overhead_p50_ms"`
	OverheadP99Ms float64 `json:"overhead_p99_ms"`
	// The standings, from the close frame each participant got.
	Standings     int     `json:"standings"`
	StandingP50Ms float64 `json:"standing_p50_ms"`
	StandingP99Ms float64 `json:"standing_p99_ms"`
	Frames        uint64  `json:"frames"`  // every frame received
	Dropped       int64   `json:"dropped"` // sockets the node closed
}

func (r quizSwarmReport) print(w io.Writer) {
	fmt.Fprintf(w, "participants %d connected %d\n", r.Participants, r.Connected)
	fmt.Fprintf(w, "question frame: %d received, p50 %.0f ms, p99 %.0f ms, max %.0f ms after the opening\n", r.QuestionFrames, r.FrameP50Ms, r.FrameP99Ms, r.FrameMaxMs)
	fmt.Fprintf(w, "answers: %d sent, %d acknowledged, refused %v; ack p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms, max %.1f ms\n",
		r.Answered, r.Acked, r.Refused, r.AckP50Ms, r.AckP99Ms, r.AckP999Ms, r.AckMaxMs)
	fmt.Fprintf(w, "node's time minus the participant's delay: p50 %.0f ms, p99 %.0f ms\n", r.OverheadP50Ms, r.OverheadP99Ms)
	fmt.Fprintf(w, "standings: %d received, p50 %.0f ms, p99 %.0f ms after the close frame\n", r.Standings, r.StandingP50Ms, r.StandingP99Ms)
	fmt.Fprintf(w, "frames %d, sockets dropped %d\n", r.Frames, r.Dropped)
}

// swarmFrame is what a participant reads of the quiz stream's frames and
// of the replies to its messages.
type swarmFrame struct {
	Type     string `json:"type"`
	Question *struct {
		Poll    string                `json:"poll"`
		Status  string                `json:"status"`
		OpensAt int64                 `json:"opens_at"`
		Options []struct{ ID string } `json:"options"`
	} `json:"question"`
	You    json.RawMessage `json:"you"`
	Result *struct {
		Results []struct {
			ElapsedMs int64 `json:"elapsed_ms"`
		} `json:"results"`
	} `json:"result"`
	Error *struct{ Code string } `json:"error"`
}

// participant is one socket's measurements.
type participant struct {
	frameMs    float64 // question frame after its opening; -1: none
	ackMs      float64 // -1: no ack
	overheadMs float64
	refused    string
	answered   bool
	standingMs float64 // standing after the close frame; -1: none
}

// runQuizSwarm connects the participants, answers the first question that
// opens, and waits for every standing (or ctx).
// It is long because it is one run read top to bottom: dial, answer,
// wait, report.
func runQuizSwarm(ctx context.Context, cfg quizSwarmConfig) (*quizSwarmReport, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		frames  atomic.Uint64
		dropped atomic.Int64
		done    atomic.Int64 // participants finished
		results = make([]participant, cfg.participants)
	)
	interval := cfg.ramp / time.Duration(cfg.participants)
	var conns []*websocket.Conn
	for i := range cfg.participants {
		src := i / cfg.perIP
		ip := net.IPv4(127, byte(1+src/250), byte(src%250), 2)
		client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}).DialContext}}
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(cfg.url, "http")+"/v1/quizzes/"+url.PathEscape(cfg.quiz)+"/live", &websocket.DialOptions{HTTPClient: client})
		if err != nil {
			cancel()
			for _, c := range conns {
				c.CloseNow()
			}
			wg.Wait()
			return nil, fmt.Errorf("participant %d from %s: %w", i, ip, err)
		}
		c.SetReadLimit(1 << 16)
		conns = append(conns, c)
		voter := fmt.Sprintf("%s-%d", cmp.Or(cfg.prefix, "herd"), i)
		if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"join","voter":"`+voter+`"}`)); err != nil {
			return nil, fmt.Errorf("participant %d: join: %w", i, err)
		}
		results[i] = participant{frameMs: -1, ackMs: -1, standingMs: -1}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.CloseNow()
			if quizParticipant(ctx, c, voter, cfg.within, &results[i], &frames) {
				if done.Add(1) == int64(cfg.participants) {
					cancel() // everyone has their standing, or was refused
				}
			} else if ctx.Err() == nil {
				dropped.Add(1)
			}
		}()
		if i%1000 == 999 {
			fmt.Fprintf(cfg.progress, "connected %d/%d\n", i+1, cfg.participants)
		}
		time.Sleep(interval)
	}
	fmt.Fprintf(cfg.progress, "connected %d/%d\n", len(conns), cfg.participants)
	wg.Wait()

	rep := &quizSwarmReport{Participants: cfg.participants, Connected: len(conns), Frames: frames.Load(), Dropped: dropped.Load(), Refused: map[string]int{}}
	var frameMs, ackMs, overhead, standingMs []float64
	for _, p := range results {
		if p.frameMs >= 0 {
			frameMs = append(frameMs, p.frameMs)
		}
		if p.answered {
			rep.Answered++
		}
		if p.ackMs >= 0 {
			ackMs = append(ackMs, p.ackMs)
			overhead = append(overhead, p.overheadMs)
		}
		if p.refused != "" {
			rep.Refused[p.refused]++
		}
		if p.standingMs >= 0 {
			standingMs = append(standingMs, p.standingMs)
		}
	}
	for _, s := range [][]float64{frameMs, ackMs, overhead, standingMs} {
		slices.Sort(s)
	}
	rep.QuestionFrames, rep.FrameP50Ms, rep.FrameP99Ms, rep.FrameMaxMs = len(frameMs), pct(frameMs, 0.5), pct(frameMs, 0.99), pct(frameMs, 1)
	rep.Acked, rep.AckP50Ms, rep.AckP99Ms, rep.AckP999Ms, rep.AckMaxMs = len(ackMs), pct(ackMs, 0.5), pct(ackMs, 0.99), pct(ackMs, 0.999), pct(ackMs, 1)
	rep.OverheadP50Ms, rep.OverheadP99Ms = pct(overhead, 0.5), pct(overhead, 0.99)
	rep.Standings, rep.StandingP50Ms, rep.StandingP99Ms = len(standingMs), pct(standingMs, 0.5), pct(standingMs, 0.99)
	return rep, nil
}

// quizParticipant follows one socket: the first open question is answered
// after a random delay within `within`; it returns true once the
// participant's standing counts the answer, or the answer was refused, and
// false when the socket ends first.
func quizParticipant(ctx context.Context, c *websocket.Conn, voter string, within time.Duration, p *participant, frames *atomic.Uint64) bool {
	var (
		mu       sync.Mutex
		question string
		sentAt   time.Time
		delay    time.Duration
		closedAt time.Time
		timer    *time.Timer
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return false
		}
		now := time.Now()
		frames.Add(1)
		var f swarmFrame
		if json.Unmarshal(data, &f) != nil {
			continue
		}
		mu.Lock()
		switch {
		case f.Type == "quiz" && f.Question != nil && f.Question.Status == "open" && question == "":
			question = f.Question.Poll
			p.frameMs = float64(now.UnixMilli() - f.Question.OpensAt)
			option := f.Question.Options[rand.IntN(len(f.Question.Options))].ID
			delay = time.Duration(rand.Int64N(int64(within) + 1))
			body := fmt.Sprintf(`{"type":"vote","ref":"a","poll":%q,"body":{"option":%q,"voter":%q,"idem":%q}}`, question, option, voter, voter)
			timer = time.AfterFunc(delay, func() {
				mu.Lock()
				sentAt = time.Now()
				p.answered = true
				mu.Unlock()
				c.Write(ctx, websocket.MessageText, []byte(body))
			})
		case f.Type == "quiz" && f.Question != nil && f.Question.Poll == question && f.Question.Status != "open" && closedAt.IsZero():
			closedAt = now
		case f.Type == "ack" && f.Result != nil && len(f.Result.Results) == 1 && f.Result.Results[0].ElapsedMs > 0:
			p.ackMs = float64(now.Sub(sentAt).Microseconds()) / 1000
			p.overheadMs = float64(f.Result.Results[0].ElapsedMs - delay.Milliseconds())
		case f.Type == "error" && f.Error != nil:
			p.refused = f.Error.Code
			mu.Unlock()
			return true // no standing will count it
		case f.Type == "standing" && len(f.You) > 0 && string(f.You) != "null" && !closedAt.IsZero():
			p.standingMs = float64(now.Sub(closedAt).Milliseconds())
			mu.Unlock()
			return true
		}
		mu.Unlock()
	}
}
