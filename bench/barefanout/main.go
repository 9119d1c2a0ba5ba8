package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"tally/api"
	"tally/bench/internal/wsaccept"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18190", "listen address")
	pollID := flag.String("poll", "demo", "the poll whose live path is answered and whose id the frame carries")
	tick := flag.Duration("tick", 250*time.Millisecond, "how often the frame goes to every connection")
	maxConns := flag.Int64("max-conns", 20_000, "the most connections open at once; past it the handshake is answered 503")
	writers := flag.Int("writers", 1, "goroutines writing each tick's frame, each to its share of the connections")
	writeTimeout := flag.Duration("write-timeout", 5*time.Second, "a connection stuck this long in one write is closed")
	flag.Parse()
	if *tick <= 0 || *maxConns <= 0 || *writers <= 0 || *writeTimeout <= 0 {
		fail("--tick, --max-conns, --writers and --write-timeout must be above 0")
	}
	f, err := newFrame(*pollID, *tick)
	if err != nil {
		fail("%v", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fail("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	s := &server{poll: *pollID, max: *maxConns, set: map[*peer]struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/polls/{poll}/live", s.live)
	mux.HandleFunc("POST /v1/polls/{poll}/votes", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, io.LimitReader(r.Body, 64<<10)) // the swarm's votes: read, not counted
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	fmt.Fprintf(os.Stderr, "barefanout: listening on %s; one %d-byte frame (payload %d) to every connection every %v, %d writer(s)\nframe: %s\n",
		ln.Addr(), len(f.buf), len(f.buf)-f.hdr, *tick, *writers, f.buf[f.hdr:])

	ws := make([]*writer, *writers)
	for i := range ws {
		ws[i] = &writer{s: s}
	}
	go s.watchdog(ctx, ws, *writeTimeout)
	s.run(ctx, f, ws, *tick)

	srv.Close()
	s.mu.Lock()
	for p := range s.set {
		p.drop()
	}
	s.mu.Unlock()
	var sent uint64
	for _, w := range ws {
		sent += w.sent.Load()
	}
	fmt.Fprintf(os.Stderr, "barefanout: %d connections at most, %d frames written, %d connections dropped by a failed or stuck write\n",
		s.peak, sent, s.dropped.Load())
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "barefanout: "+format+"\n", args...)
	os.Exit(2)
}

// frame is the one frame every connection gets: header and payload in
// one buffer, built once; seq and asOf are the payload's two numbers
// that change each tick, fixed-width slots of buf.
type frame struct {
	buf       []byte
	hdr       int // the header's length
	seq, asOf []byte
}

// Placeholders that give the slots their width: seq up to 9,999,999,999
// (79 years of 250 ms ticks), as_of_ms 13 digits (until the year 2286).
const (
	seqSlot  = 9_999_999_999
	asOfSlot = 9_999_999_999_999
)

// newFrame encodes a diff of the poll as the node would send it at 40
// votes/s: four changed totals, the rate, the viewers, the poll's times,
// the leader and the freshness vector.
func newFrame(pollID string, tick time.Duration) (*frame, error) {
	opens := time.Now().Add(-time.Minute).UnixMilli()
	payload, err := json.Marshal(&api.Frame{
		Type: api.TypeDiff, Poll: pollID, Seq: seqSlot, AsOfMs: asOfSlot, TickMs: tick.Milliseconds(), Status: "open",
		Totals: map[string]int64{"blue": 1616, "gold": 606, "green": 1888, "red": 707}, Total: 4817,
		VotesPerMin: 2394.585707618275, Viewers: 18000, OpensAt: opens, ClosesAt: opens + 86_400_000,
		Leader: "green", Regions: map[string]int64{"local": 0},
	})
	if err != nil {
		return nil, err
	}
	// An unmasked text frame, FIN set (RFC 6455 §5.2).
	var buf []byte
	switch n := len(payload); {
	case n <= 125:
		buf = append(buf, 0x81, byte(n))
	case n <= 0xffff:
		buf = binary.BigEndian.AppendUint16(append(buf, 0x81, 126), uint16(n))
	default:
		buf = binary.BigEndian.AppendUint64(append(buf, 0x81, 127), uint64(n))
	}
	f := &frame{hdr: len(buf)}
	f.buf = append(buf, payload...)
	if f.seq, err = f.slot(`"seq":`, seqSlot); err != nil {
		return nil, err
	}
	if f.asOf, err = f.slot(`"as_of_ms":`, asOfSlot); err != nil {
		return nil, err
	}
	return f, nil
}

// slot returns the bytes of f.buf holding placeholder after key.
func (f *frame) slot(key string, placeholder uint64) ([]byte, error) {
	digits := fmt.Sprint(placeholder)
	i := bytes.Index(f.buf, []byte(key+digits))
	if i < 0 {
		return nil, fmt.Errorf("no %s%s in the encoded frame", key, digits)
	}
	i += len(key)
	return f.buf[i : i+len(digits) : i+len(digits)], nil
}

// put writes v into slot, left-aligned and padded with spaces (JSON
// allows whitespace between a number and the comma after it), without
// allocating.
func put(slot []byte, v uint64) {
	var d [20]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	if len(d)-i > len(slot) {
		panic("a number outgrew its slot in the frame")
	}
	n := copy(slot, d[i:])
	for ; n < len(slot); n++ {
		slot[n] = ' '
	}
}

// server holds the connections.
type server struct {
	poll    string
	max     int64
	open    atomic.Int64 // connections admitted and not yet removed
	dropped atomic.Int64 // closed by a failed or stuck write

	mu   sync.Mutex
	set  map[*peer]struct{}
	gen  uint64 // changes with set, so the writer copies it only then
	peak int
}

// peer is one connection.
type peer struct {
	conn net.Conn
	dead atomic.Bool // closed: the writer skips it until its reader removes it
}

// drop closes the connection once; it reports whether this call did.
func (p *peer) drop() bool {
	if !p.dead.CompareAndSwap(false, true) {
		return false
	}
	p.conn.Close()
	return true
}

// live answers the WebSocket handshake by hand, hijacks the connection,
// adds it to the set and reads it on a goroutine of its own; the handler
// returns, and net/http keeps nothing of the connection.
func (s *server) live(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("poll") != s.poll {
		http.Error(w, "no such poll here", http.StatusNotFound)
		return
	}
	key, ok := wsaccept.Check(w, r)
	if !ok {
		return
	}
	if s.open.Add(1) > s.max {
		s.open.Add(-1)
		http.Error(w, "too many connections", http.StatusServiceUnavailable)
		return
	}
	conn, br, err := wsaccept.Accept(w, key)
	if err != nil {
		s.open.Add(-1)
		return
	}
	if br.Buffered() == 0 { // nothing the client sent past its request: a small reader

		br = bufio.NewReaderSize(conn, 64) // its smallest is 16; 64 holds any header
	}
	p := &peer{conn: conn}
	s.mu.Lock()
	s.set[p] = struct{}{}
	s.gen++
	s.peak = max(s.peak, len(s.set))
	s.mu.Unlock()
	go s.read(p, br)
}

// closeFrame answers a client's close: status 1000, normal closure.
var closeFrame = []byte{0x88, 2, 0x03, 0xe8}

// maxDiscard bounds a client frame: the swarm sends none, and one larger
// than this is not a viewer's.
const maxDiscard = 1 << 20

// read reads frame headers and discards the payloads until the client
// closes or the connection fails, then removes the connection.
func (s *server) read(p *peer, br *bufio.Reader) {
	defer func() {
		p.drop()
		s.mu.Lock()
		delete(s.set, p)
		s.gen++
		s.mu.Unlock()
		s.open.Add(-1)
	}()
	for {
		b0, err := br.ReadByte()
		if err != nil {
			return
		}
		b1, err := br.ReadByte()
		if err != nil {
			return
		}
		n := uint64(b1 & 0x7f)
		if n >= 126 {
			k := 2
			if n == 127 {
				k = 8
			}
			n = 0
			for range k {
				c, err := br.ReadByte()
				if err != nil {
					return
				}
				n = n<<8 | uint64(c)
			}
		}
		if n > maxDiscard {
			return
		}
		if b1&0x80 != 0 {
			n += 4 // the masking key
		}
		if b0&0x0f == 0x8 {
			p.conn.Write(closeFrame)
			return
		}
		if _, err := br.Discard(int(n)); err != nil {
			return
		}
	}
}

// run ticks until ctx ends: each tick writes seq and as_of_ms into the
// frame and the writers write it to every connection; the next tick
// starts once they are done (a tick that overruns delays the next, as
// the node's does).
func (s *server) run(ctx context.Context, f *frame, ws []*writer, tick time.Duration) {
	var (
		list []*peer // the writers' copy of the set, rebuilt when it changed
		gen  uint64
		done sync.WaitGroup
	)
	for _, w := range ws[1:] {
		w.jobs = make(chan []*peer)
		go func() {
			for part := range w.jobs {
				w.write(part, f.buf)
				done.Done()
			}
		}()
	}
	defer func() {
		for _, w := range ws[1:] {
			close(w.jobs)
		}
	}()
	t := time.NewTicker(tick)
	defer t.Stop()
	for seq := uint64(1); ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		put(f.seq, seq)
		put(f.asOf, uint64(time.Now().UnixMilli()))
		s.mu.Lock()
		if s.gen != gen || list == nil {
			clear(list)
			list = list[:0]
			for p := range s.set {
				list = append(list, p)
			}
			gen = s.gen
		}
		s.mu.Unlock()
		k := len(ws)
		done.Add(k - 1)
		for i, w := range ws[1:] {
			w.jobs <- list[(i+1)*len(list)/k : (i+2)*len(list)/k]
		}
		ws[0].write(list[:len(list)/k], f.buf)
		done.Wait()
	}
}

// writer writes the frame to its share of the connections, one
// conn.Write each.
type writer struct {
	s    *server
	jobs chan []*peer // each tick's share; nil for the first writer, which runs on the ticking goroutine
	sent atomic.Uint64

	// For the watchdog: the connection being written and a count of
	// writes started, so it can tell one stuck write from many.
	cur    atomic.Pointer[peer]
	writes atomic.Uint64
}

func (w *writer) write(list []*peer, b []byte) {
	var sent uint64
	for _, p := range list {
		if p.dead.Load() {
			continue
		}
		w.cur.Store(p)
		w.writes.Add(1)
		if _, err := p.conn.Write(b); err != nil {
			if p.drop() {
				w.s.dropped.Add(1)
			}
			continue
		}
		sent++
	}
	w.cur.Store(nil)
	w.sent.Add(sent)
}

// watchdog closes a connection that has been in one write for timeout;
// closing it ends the write with an error, and the writer drops it.
func (s *server) watchdog(ctx context.Context, ws []*writer, timeout time.Duration) {
	type seen struct {
		p      *peer
		writes uint64
		since  time.Time
	}
	last := make([]seen, len(ws))
	t := time.NewTicker(max(timeout/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for i, w := range ws {
				p, n := w.cur.Load(), w.writes.Load()
				if p == nil || p != last[i].p || n != last[i].writes {
					last[i] = seen{p, n, now}
					continue
				}
				if now.Sub(last[i].since) >= timeout && p.drop() {
					s.dropped.Add(1)
				}
			}
		}
	}
}
