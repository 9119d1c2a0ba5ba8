package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// viewers are WebSocket viewers of one poll, spread over the regions, each
// reading every frame and counting the ones it missed (gaps in seq).
type viewers struct {
	frames, missed, failed, dropped atomic.Int64
	wg                              sync.WaitGroup
	// socks are the viewers' sockets that carry votes (--edges), by
	// viewer; nil where none (or it failed to connect).
	socks []*voterSocket
}

// viewerAt says where viewer i watches from: the node's URL, its address
// (X-Forwarded-For) and User-Agent.
type viewerAt func(i int) (url, addr, userAgent string)

// viewerAddr is viewer i's address: each its own, as phones on different
// networks.
func viewerAddr(i int) string { return fmt.Sprintf("172.%d.%d.%d", 16+i>>16&15, i>>8&255, i&255) }

// connect opens n viewers where at says, and returns once they are all
// connected (or failed to). With carry, every socket also carries votes
// (socks).
func (v *viewers) connect(ctx context.Context, at viewerAt, poll string, n int, carry bool) {
	if carry {
		v.socks = make([]*voterSocket, n)
	}
	var ready sync.WaitGroup
	sem := make(chan struct{}, 64) // connects in flight
	for i := range n {
		ready.Add(1)
		v.wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer v.wg.Done()
			base, addr, ua := at(i)
			h := http.Header{}
			h.Set("X-Forwarded-For", addr)
			h.Set("User-Agent", ua)
			url := "ws" + strings.TrimPrefix(base, "http") + "/v1/polls/" + poll + "/live"
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			c, _, err := websocket.Dial(dctx, url, &websocket.DialOptions{HTTPHeader: h})
			cancel()
			var vs *voterSocket
			if err == nil && carry {
				vs = newVoterSocket(c)
				v.socks[i] = vs
			}
			<-sem
			ready.Done()
			if err != nil {
				v.failed.Add(1)
				return
			}
			defer c.CloseNow()
			c.SetReadLimit(1 << 20)
			last := int64(-1)
			for {
				_, b, err := c.Read(ctx)
				if err != nil {
					if ctx.Err() == nil {
						v.dropped.Add(1)
					}
					return
				}
				if vs != nil && vs.answer(b) {
					continue // a vote's answer, not a frame of the poll
				}
				v.frames.Add(1)
				seq := field(b, `"seq":`)
				if last >= 0 && seq > last+1 {
					v.missed.Add(seq - last - 1)
				}
				if seq > last {
					last = seq
				}
			}
		}()
	}
	ready.Wait()
}

// field reads an integer field from a frame without decoding all of it:
// 15,000 viewers read every frame, on the same cores as the nodes.
func field(b []byte, key string) int64 {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return -1
	}
	b = b[i+len(key):]
	j := 0
	for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == '-') {
		j++
	}
	n, _ := strconv.ParseInt(string(b[:j]), 10, 64)
	return n
}

// prober measures vote to viewer across regions: a vote for the probe poll
// at one region, acknowledged, then the first frame at a viewer in
// another region whose total includes it. One probe at a time, every
// 200 ms, while the night runs.
type prober struct {
	mu      sync.Mutex
	shown   int64 // highest total the viewer has seen
	changed chan struct{}
	lat     []time.Duration
	lost    int
}

func (p *prober) watch(ctx context.Context, url, poll string) error {
	h := http.Header{}
	h.Set("X-Forwarded-For", "192.0.2.1")
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/v1/polls/"+poll+"/live", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		return err
	}
	p.changed = make(chan struct{}, 1)
	go func() {
		defer c.CloseNow()
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			if t := field(b, `"total":`); t >= 0 {
				p.mu.Lock()
				p.shown = max(p.shown, t)
				p.mu.Unlock()
				select {
				case p.changed <- struct{}{}:
				default:
				}
			}
		}
	}()
	return nil
}

// seen waits until the viewer shows a total of at least n, up to 10 s.
func (p *prober) seen(n int64) bool {
	deadline := time.After(10 * time.Second)
	for {
		p.mu.Lock()
		ok := p.shown >= n
		p.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-p.changed:
		case <-deadline:
			return false
		}
	}
}
