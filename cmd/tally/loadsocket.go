package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"tally/api"
)

// loadSockets is `tally load --socket`: votes as messages on live sockets,
// as the page sends them. cfg.connections sockets share cfg.rate (each
// stays under the node's 20 messages a second), from loopback source
// addresses 100 sockets each (under --max-viewers-per-ip); each message
// is one vote (or a batch with --batch), timed from its write to its ack.
// Each vote carries its voter's newest stamp as "after"; a message
// answered outcome_unknown is sent again, the same bytes, a second later
// (in place of a new one, so the pace holds) until a definitive answer.
func loadSockets(cfg loadConfig, progress io.Writer) (*loadReport, error) {
	if cfg.rate <= 0 {
		return nil, fmt.Errorf("--socket needs --rate above 0")
	}
	if per := float64(cfg.rate) / float64(cfg.connections); per > 18 {
		return nil, fmt.Errorf("--rate %d over %d sockets is %.0f messages a second each; the node closes a socket past 20: use more --connections", cfg.rate, cfg.connections, per)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration+unknownWait+30*time.Second)
	defer cancel()
	conns, err := dialSockets(ctx, cfg)
	defer func() {
		for _, c := range conns {
			c.CloseNow()
		}
	}()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "%d sockets open\n", len(conns))
	l := &sockLoad{cfg: cfg, run: fmt.Sprintf("sock%x", time.Now().UnixNano()), start: time.Now(),
		rep: &loadReport{Codes: map[int]int{}, Acks: map[string]int{}}}
	every := time.Duration(float64(time.Second) * float64(cfg.connections) / float64(cfg.rate))
	var wg sync.WaitGroup
	for i, c := range conns {
		v := &sockVoter{l: l, i: i, c: c, every: every, sent: map[string]*pending{}, stamps: map[int]string{},
			rng: rand.New(rand.NewPCG(uint64(i), uint64(l.start.UnixNano())))}
		wg.Go(func() { v.run(ctx) })
	}
	wg.Wait()
	if len(l.lat) == 0 {
		return nil, fmt.Errorf("no vote was answered")
	}
	l.rep.finish(l.start, l.lat)
	return l.rep, nil
}

// dialSockets opens cfg.connections live sockets, spread over cfg.urls,
// from loopback source addresses 100 sockets each.
func dialSockets(ctx context.Context, cfg loadConfig) ([]*websocket.Conn, error) {
	conns := make([]*websocket.Conn, 0, cfg.connections)
	for i := range cfg.connections {
		ip := net.IPv4(127, byte(1+(i/100)/250), byte((i/100)%250), 3)
		client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}).DialContext}}
		u := cfg.urls[i%len(cfg.urls)]
		c, _, err := websocket.Dial(ctx, wsURL(u, cfg.poll), &websocket.DialOptions{HTTPClient: client})
		if err != nil {
			return conns, fmt.Errorf("socket %d from %s: %w", i, ip, err)
		}
		c.SetReadLimit(1 << 16)
		conns = append(conns, c)
	}
	return conns, nil
}

// sockLoad is one run's shared report.
type sockLoad struct {
	cfg   loadConfig
	run   string // this run's prefix of every idempotency key
	start time.Time

	mu  sync.Mutex // guards rep and lat
	rep *loadReport
	lat []time.Duration
}

// count changes the report under its lock.
func (l *sockLoad) count(f func(rep *loadReport)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(l.rep)
}

// pending is a message sent and not answered for good yet.
type pending struct {
	first   time.Time // its first write: its latency and unknownWait run from it
	msg     []byte
	unknown bool      // answered outcome_unknown at least once
	due     time.Time // when to send it again (its outcome was unknown); zero: waiting for an answer
}

// sockVoter is one socket: its pace, what it sent and awaits, and its
// voters' newest stamps.
type sockVoter struct {
	l     *sockLoad
	i     int
	c     *websocket.Conn
	every time.Duration // between two messages
	rng   *rand.Rand

	mu     sync.Mutex // guards sent and stamps (the reader and the writer)
	sent   map[string]*pending
	stamps map[int]string // this socket's voters → the newest stamp of their answers
}

// run sends at the socket's pace until the run's duration is over, then
// waits for the last answers (and sends again what is due), at most 5 s
// after the last thing sent, and closes the socket.
func (v *sockVoter) run(ctx context.Context) {
	readDone := make(chan struct{})
	go func() { // owned by run: it ends when the socket closes
		defer close(readDone)
		v.read(ctx)
	}()
	defer func() {
		v.c.Close(websocket.StatusNormalClosure, "")
		<-readDone
	}()
	// Sockets start spread over one interval, so the rate is even.
	time.Sleep(time.Duration(v.rng.Int64N(int64(v.every))))
	tick := time.NewTicker(v.every)
	defer tick.Stop()
	for seq := 0; time.Since(v.l.start) < v.l.cfg.duration; seq++ {
		again, err := v.resend(ctx)
		if err == nil && !again {
			err = v.send(ctx, seq)
		}
		if err != nil {
			v.l.count(func(rep *loadReport) { rep.Errors++ })
			return
		}
		<-tick.C
	}
	v.drain(ctx)
}

// send writes one new message: cfg.batch votes of random voters, each
// after its voter's newest stamp.
func (v *sockVoter) send(ctx context.Context, seq int) error {
	cfg := v.l.cfg
	ref := strconv.Itoa(seq)
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"type":"vote","ref":%q,"body":{"votes":[`, ref)
	v.mu.Lock()
	for j := range cfg.batch {
		if j > 0 {
			b.WriteByte(',')
		}
		voter := v.rng.IntN(cfg.voters)
		fmt.Fprintf(&b, `{"option":%q,"voter":"sock-%d-%d","idem":"%s-%d-%d-%d-%d"`, cfg.options[v.rng.IntN(len(cfg.options))], v.i, voter, v.l.run, v.i, seq, j, voter)
		if after := v.stamps[voter]; after != "" {
			fmt.Fprintf(&b, `,"after":%q`, after)
		}
		b.WriteByte('}')
	}
	b.WriteString(`]}}`)
	v.sent[ref] = &pending{first: time.Now(), msg: b.Bytes()}
	v.mu.Unlock()
	if err := v.c.Write(ctx, websocket.MessageText, b.Bytes()); err != nil {
		return err
	}
	v.l.count(func(rep *loadReport) { rep.Requests++ })
	return nil
}

// resend sends one message whose outcome was unknown again, when one is
// due: the same bytes (ref, keys, stamps). It takes a turn of the
// socket's pace, so the socket stays under the node's limit of messages a
// second.
func (v *sockVoter) resend(ctx context.Context) (bool, error) {
	v.mu.Lock()
	var msg []byte
	for _, p := range v.sent {
		if !p.due.IsZero() && time.Now().After(p.due) {
			p.due, msg = time.Time{}, p.msg
			break
		}
	}
	v.mu.Unlock()
	if msg == nil {
		return false, nil
	}
	v.l.count(func(rep *loadReport) { rep.Resent++ })
	return true, v.c.Write(ctx, websocket.MessageText, msg)
}

// drain waits for the last answers, sending again what falls due, 5 s
// after the last thing sent at most; what is still unknown is counted.
func (v *sockVoter) drain(ctx context.Context) {
	last, quiet := time.Now(), 5*time.Second
	for time.Since(last) < quiet {
		v.mu.Lock()
		n := len(v.sent)
		v.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Since(last) >= v.every {
			if again, err := v.resend(ctx); err != nil {
				break
			} else if again {
				last = time.Now()
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, p := range v.sent {
		if p.unknown {
			v.l.count(func(rep *loadReport) { rep.StillUnknown++ })
		}
	}
}

// read takes the socket's answers until it closes: an ack or an error
// settles its message (an outcome_unknown makes it due again a second
// later, within unknownWait); the poll's frames are skipped.
func (v *sockVoter) read(ctx context.Context) {
	for {
		_, b, err := v.c.Read(ctx)
		if err != nil {
			return
		}
		v.answer(b)
	}
}

// answer applies one message the socket received.
func (v *sockVoter) answer(b []byte) {
	ref := refOf(b)
	ack := bytes.Contains(b, []byte(`"type":"ack"`))
	v.mu.Lock()
	p, ok := v.sent[ref]
	if !ok || !p.due.IsZero() {
		v.mu.Unlock()
		return // a frame of the poll, not an answer
	}
	still, first := false, false
	if !ack && bytes.Contains(b, []byte(`"code":"outcome_unknown"`)) {
		first, p.unknown = !p.unknown, true
		if time.Since(p.first)+time.Second < unknownWait {
			p.due = time.Now().Add(time.Second) // the same message again, after a second
		} else {
			still = true // no definitive answer within unknownWait
		}
	}
	final := p.due.IsZero()
	if final {
		delete(v.sent, ref)
	}
	if ack {
		eachStamp(b, func(voter int, stamp string) { v.stamps[voter] = api.LaterStamp(v.stamps[voter], stamp) })
	}
	v.mu.Unlock()
	v.l.mu.Lock()
	defer v.l.mu.Unlock()
	rep := v.l.rep
	if first {
		rep.Unknown++
	}
	if !final {
		return
	}
	v.l.lat = append(v.l.lat, time.Since(p.first))
	if !ack {
		rep.Codes[0]++
		rep.Errors++
		if still {
			rep.StillUnknown++
		}
		return
	}
	rep.Codes[200]++
	for _, st := range []string{"accepted", "duplicate", "late", "rejected"} {
		if n := bytes.Count(b, []byte(`"status":"`+st+`"`)); n > 0 {
			rep.Acks[st] += n
			rep.Votes += n
		}
	}
}

// refOf picks a message's "ref" out by hand (answers carry it first).
func refOf(b []byte) string {
	i := bytes.Index(b, []byte(`"ref":"`))
	if i < 0 {
		return ""
	}
	b = b[i+7:]
	j := bytes.IndexByte(b, '"')
	if j < 0 {
		return ""
	}
	return string(b[:j])
}
