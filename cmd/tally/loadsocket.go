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
)

// loadSockets is `tally load --socket`: votes as messages on live sockets,
// as the page sends them. cfg.connections sockets share cfg.rate (each
// stays under the node's 20 messages a second), from loopback source
// addresses 100 sockets each (under --max-viewers-per-ip); each message
// is one vote (or a batch with --batch), timed from its write to its ack.
func loadSockets(cfg loadConfig, progress io.Writer) (*loadReport, error) {
	if cfg.rate <= 0 {
		return nil, fmt.Errorf("--socket needs --rate above 0")
	}
	if per := float64(cfg.rate) / float64(cfg.connections); per > 18 {
		return nil, fmt.Errorf("--rate %d over %d sockets is %.0f messages a second each; the node closes a socket past 20: use more --connections", cfg.rate, cfg.connections, per)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration+30*time.Second)
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
			sent := map[string]time.Time{}
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
					smu.Lock()
					t0, ok := sent[ref]
					delete(sent, ref)
					smu.Unlock()
					if !ok {
						continue // a frame of the poll, not an answer
					}
					mu.Lock()
					lat = append(lat, time.Since(t0))
					if bytes.Contains(b, []byte(`"type":"ack"`)) {
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
					}
					mu.Unlock()
				}
			}()
			every := time.Duration(float64(time.Second) * float64(cfg.connections) / float64(cfg.rate))
			rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			// Sockets start spread over one interval, so the rate is even.
			time.Sleep(time.Duration(rng.Int64N(int64(every))))
			tick := time.NewTicker(every)
			defer tick.Stop()
			for seq := 0; time.Since(start) < cfg.duration; seq++ {
				ref := strconv.Itoa(seq)
				var b bytes.Buffer
				fmt.Fprintf(&b, `{"type":"vote","ref":%q,"body":{"votes":[`, ref)
				for j := range cfg.batch {
					if j > 0 {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, `{"option":%q,"voter":"sock-%d-%d","idem":"%s-%d-%d-%d"}`, cfg.options[rng.IntN(len(cfg.options))], i, rng.IntN(cfg.voters), run, i, seq, j)
				}
				b.WriteString(`]}}`)
				smu.Lock()
				sent[ref] = time.Now()
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
			// The last answers, then the socket closes.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				smu.Lock()
				n := len(sent)
				smu.Unlock()
				if n == 0 {
					break
				}
			}
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
