package gossiptest

import (
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Delay is a WAN's latency on loopback: wrapped in it (Delay.Wrap as a
// gossip.Config.WrapTransport), a node holds every packet it sends for D
// before it goes, and every write on a stream it opens. A stream's answer
// comes after the request that took D, so whichever way state flows it
// arrives at least D after it was sent.
type Delay struct{ D time.Duration }

// Wrap is a gossip.Config.WrapTransport that delays what the node sends.
func (d Delay) Wrap(t memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
	return &delayed{NodeAwareTransport: t, d: d.D, done: make(chan struct{})}
}

type delayed struct {
	memberlist.NodeAwareTransport
	d    time.Duration
	wg   sync.WaitGroup // packets on their way
	mu   sync.Mutex
	shut bool
	done chan struct{}
}

// later sends a copy of b after the delay, unless the transport shuts
// down first.
func (t *delayed) later(b []byte, send func([]byte)) (time.Time, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shut {
		return time.Now(), nil
	}
	b = append([]byte(nil), b...) // memberlist reuses its buffers
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		timer := time.NewTimer(t.d)
		defer timer.Stop()
		select {
		case <-timer.C:
			send(b)
		case <-t.done:
		}
	}()
	return time.Now(), nil
}

func (t *delayed) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.later(b, func(b []byte) { t.NodeAwareTransport.WriteTo(b, addr) })
}

func (t *delayed) WriteToAddress(b []byte, addr memberlist.Address) (time.Time, error) {
	return t.later(b, func(b []byte) { t.NodeAwareTransport.WriteToAddress(b, addr) })
}

func (t *delayed) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := t.NodeAwareTransport.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return &slowConn{Conn: c, d: t.d}, nil
}

func (t *delayed) DialAddressTimeout(addr memberlist.Address, timeout time.Duration) (net.Conn, error) {
	c, err := t.NodeAwareTransport.DialAddressTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return &slowConn{Conn: c, d: t.d}, nil
}

// Shutdown drops the packets still on their way, then shuts the real
// transport down.
func (t *delayed) Shutdown() error {
	t.mu.Lock()
	if !t.shut {
		t.shut = true
		close(t.done)
	}
	t.mu.Unlock()
	t.wg.Wait()
	return t.NodeAwareTransport.Shutdown()
}

// slowConn holds each write for d.
type slowConn struct {
	net.Conn
	d time.Duration
}

func (c *slowConn) Write(b []byte) (int, error) {
	time.Sleep(c.d) // on the writer's goroutine: memberlist's, which waits for the write anyway
	return c.Conn.Write(b)
}
