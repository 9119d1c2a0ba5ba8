package gossiptest

import (
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards TCP connections from a loopback port to a target,
// delaying every chunk by Delay in each direction (order kept), and can
// cut all traffic. Close stops it and every connection it holds.
type Proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	delay time.Duration
	cut   bool
	conns map[net.Conn]struct{}

	wg sync.WaitGroup
}

// NewProxy listens on a loopback port and forwards to target.
func NewProxy(target string, delay time.Duration) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, delay: delay, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close stops the proxy.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil || !p.track(out) {
			p.untrack(in)
			if out != nil {
				out.Close()
			}
			continue
		}
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies src to dst, each chunk delivered delay after it was read.
func (p *Proxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	defer p.untrack(src)
	defer p.untrack(dst)
	type chunk struct {
		at time.Time
		b  []byte
	}
	ch := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() { // the writer: owned by this pipe, ends when ch closes
		defer close(done)
		for c := range ch {
			time.Sleep(time.Until(c.at))
			if _, err := dst.Write(c.b); err != nil {
				for range ch {
				}
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			d := p.delay
			p.mu.Unlock()
			ch <- chunk{at: time.Now().Add(d), b: append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			break
		}
	}
	close(ch)
	<-done
}
