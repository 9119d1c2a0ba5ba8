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
	run := fmt.Sprintf("sock%x", time.Now().UnixNano())
	var (
		mu  sync.Mutex
		rep = &loadReport{Codes: map[int]int{}, Acks: map[string]int{}}
		lat []time.Duration
	)
	conns := make([]*websocket.Conn, 0, cfg.connections)
	defer func() {
		for _, c := range conns {
			c.CloseNow()
		}
	}()
	for i := range cfg.connections {
		ip := net.IPv4(127, byte(1+(i/100)/250), byte((i/100)%250), 3)
		client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}).DialContext}}
		u := cfg.urls[i%len(cfg.urls)]
		c, _, err := websocket.Dial(ctx, wsURL(u, cfg.poll), &websocket.DialOptions{HTTPClient: client})
		if err != nil {
			return nil, fmt.Errorf("socket %d from %s: %w", i, ip, err)
		}
		c.SetReadLimit(1 << 16)
		conns = append(conns, c)
	}
	fmt.Fprintf(progress, "%d sockets open\n", len(conns))
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			// pending is a message sent and not answered for good yet.
			type pending struct {
				first   time.Time // its first write: its latency and unknownWait run from it
				msg     []byte
				unknown bool      // answered outcome_unknown at least once
				due     time.Time // when to send it again (its outcome was unknown); zero: waiting for an answer
			}
			sent := map[string]*pending{}
			stamps := map[int]string{} // this socket's voters → the newest stamp of their answers
			var smu sync.Mutex
			readDone := make(chan struct{})
			go func() { // owned by this socket's loop: it ends when the socket closes
				defer close(readDone)
				for {
					_, b, err := c.Read(ctx)
					if err != nil {
						return
					}
					ref := refOf(b)
					ack := bytes.Contains(b, []byte(`"type":"ack"`))
					smu.Lock()
					p, ok := sent[ref]
					if !ok || !p.due.IsZero() {
						smu.Unlock()
						continue // a frame of the poll, not an answer
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
						delete(sent, ref)
					}
					if ack {
						eachStamp(b, func(v int, stamp string) { stamps[v] = api.LaterStamp(stamps[v], stamp) })
					}
					smu.Unlock()
					mu.Lock()
					if first {
						rep.Unknown++
					}
					if final {
						lat = append(lat, time.Since(p.first))
						if ack {
							rep.Codes[200]++
							for _, st := range []string{"accepted", "duplicate", "late", "rejected"} {
								if n := bytes.Count(b, []byte(`"status":"`+st+`"`)); n > 0 {
									rep.Acks[st] += n
									rep.Votes += n
								}
							}
						} else {
							rep.Codes[0]++
							rep.Errors++
							if still {
								rep.StillUnknown++
							}
						}
					}
					mu.Unlock()
				}
			}()
			// resend sends one message whose outcome was unknown again, when
			// one is due: the same bytes (ref, keys, stamps). It takes a turn
			// of the socket's pace, so the socket stays under the node's
			// limit of messages a second.
			resend := func() (bool, error) {
				smu.Lock()
				var msg []byte
				for _, p := range sent {
					if !p.due.IsZero() && time.Now().After(p.due) {
						p.due, msg = time.Time{}, p.msg
						break
					}
				}
				smu.Unlock()
				if msg == nil {
					return false, nil
				}
				mu.Lock()
				rep.Resent++
				mu.Unlock()
				return true, c.Write(ctx, websocket.MessageText, msg)
			}
			every := time.Duration(float64(time.Second) * float64(cfg.connections) / float64(cfg.rate))
			rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			// Sockets start spread over one interval, so the rate is even.
			time.Sleep(time.Duration(rng.Int64N(int64(every))))
			tick := time.NewTicker(every)
			defer tick.Stop()
			for seq := 0; time.Since(start) < cfg.duration; seq++ {
				if again, err := resend(); again || err != nil {
					if err != nil {
						mu.Lock()
						rep.Errors++
						mu.Unlock()
						return
					}
					<-tick.C
					continue
				}
				ref := strconv.Itoa(seq)
				var b bytes.Buffer
				fmt.Fprintf(&b, `{"type":"vote","ref":%q,"body":{"votes":[`, ref)
				smu.Lock()
				for j := range cfg.batch {
					if j > 0 {
						b.WriteByte(',')
					}
					v := rng.IntN(cfg.voters)
					fmt.Fprintf(&b, `{"option":%q,"voter":"sock-%d-%d","idem":"%s-%d-%d-%d-%d"`, cfg.options[rng.IntN(len(cfg.options))], i, v, run, i, seq, j, v)
					if after := stamps[v]; after != "" {
						fmt.Fprintf(&b, `,"after":%q`, after)
					}
					b.WriteByte('}')
				}
				b.WriteString(`]}}`)
				sent[ref] = &pending{first: time.Now(), msg: b.Bytes()}
				smu.Unlock()
				if err := c.Write(ctx, websocket.MessageText, b.Bytes()); err != nil {
					mu.Lock()
					rep.Errors++
					mu.Unlock()
					return
				}
				mu.Lock()
				rep.Requests++
				mu.Unlock()
				<-tick.C
			}
			// The last answers (and the last messages sent again), then the
			// socket closes: 5 s after the last thing sent at most.
			last, quiet := time.Now(), 5*time.Second
			for time.Since(last) < quiet {
				smu.Lock()
				n := len(sent)
				smu.Unlock()
				if n == 0 {
					break
				}
				if time.Since(last) >= every {
					if again, err := resend(); err != nil {
						break
					} else if again {
						last = time.Now()
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
			smu.Lock()
			for _, p := range sent {
				if p.unknown {
					mu.Lock()
					rep.StillUnknown++
					mu.Unlock()
				}
			}
			smu.Unlock()
			c.Close(websocket.StatusNormalClosure, "")
			<-readDone
		})
	}
	wg.Wait()
	if len(lat) == 0 {
		return nil, fmt.Errorf("no vote was answered")
	}
	rep.finish(start, lat)
	return rep, nil
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
