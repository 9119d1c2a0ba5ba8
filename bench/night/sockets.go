package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"
)

// voterSocket is a viewer's socket at an edge that also carries votes, as
// the page sends them (docs/api.md): a message a vote, the voter's token
// in it, the answer matched by ref. The night pools voters on the
// viewers' sockets (a million sockets do not fit one machine): each
// socket carries the votes of the voters behind its address, paced under
// the node's 20 messages a second a socket.
type voterSocket struct {
	c       *websocket.Conn
	pace    *rate.Limiter
	next    atomic.Int64 // refs
	mu      sync.Mutex
	waiting map[string]chan []byte // ref → its answer
}

// socketPace keeps a socket under the node's 20 messages a second: at
// most 3 + 15 in any second, with room for the pongs to its pings.
const socketPace, socketBurst = 15, 3

func newVoterSocket(c *websocket.Conn) *voterSocket {
	return &voterSocket{c: c, pace: rate.NewLimiter(socketPace, socketBurst), waiting: map[string]chan []byte{}}
}

// answer hands an ack or error frame to the vote waiting for it, and
// reports whether the frame was one.
func (s *voterSocket) answer(b []byte) bool {
	if !bytes.Contains(b, []byte(`"type":"ack"`)) && !bytes.Contains(b, []byte(`"type":"error"`)) {
		return false
	}
	ref := stringField(b, `"ref":"`)
	s.mu.Lock()
	ch := s.waiting[ref]
	delete(s.waiting, ref)
	s.mu.Unlock()
	if ch != nil {
		ch <- b
	}
	return true
}

// vote sends one vote and waits for its answer (up to 30 s, as the HTTP
// voters' client). The latency is from the message's write: the wait for
// the socket's pace shows in the schedule lag, not in it.
func (s *voterSocket) vote(ctx context.Context, token, body string) (status string, lat time.Duration, paced time.Duration) {
	t := time.Now()
	if err := s.pace.Wait(ctx); err != nil {
		return "error", 0, time.Since(t)
	}
	paced = time.Since(t)
	ref := strconv.FormatInt(s.next.Add(1), 36)
	ch := make(chan []byte, 1)
	s.mu.Lock()
	s.waiting[ref] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiting, ref)
		s.mu.Unlock()
	}()
	msg := fmt.Sprintf(`{"type":"vote","ref":%q,"token":%q,"body":%s}`, ref, token, body)
	t0 := time.Now()
	if err := s.c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		return "error", time.Since(t0), paced
	}
	select {
	case b := <-ch:
		lat = time.Since(t0)
		if bytes.Contains(b, []byte(`"type":"error"`)) {
			return "rejected:" + stringField(b, `"code":"`), lat, paced
		}
		return stringField(b, `"status":"`), lat, paced
	case <-time.After(30 * time.Second):
		return "error", time.Since(t0), paced
	case <-ctx.Done():
		return "error", time.Since(t0), paced
	}
}

// stringField reads the string value after key (which ends in its opening
// quote) without decoding the frame.
func stringField(b []byte, key string) string {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return ""
	}
	b = b[i+len(key):]
	if j := bytes.IndexByte(b, '"'); j >= 0 {
		return string(b[:j])
	}
	return ""
}
