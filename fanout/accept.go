package fanout

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"tally/api"
)

// jsonRefusals wraps the ResponseWriter while the WebSocket handshake is
// checked: a refusal that the websocket library answers with http.Error
// (426 without Upgrade, 403 for a foreign origin, 400 for a bad
// handshake) goes out in the API's JSON error shape instead of plain text.
// A successful handshake passes through untouched (Hijack included).
type jsonRefusals struct {
	http.ResponseWriter
	r      *http.Request           // the handshake's request
	status int                     // a refusal's status, held until its message is written
	done   bool                    //
	wrap   func(net.Conn) net.Conn // applied to the hijacked connection
}

func (j *jsonRefusals) WriteHeader(code int) {
	if code >= 400 {
		j.status = code
		return
	}
	j.ResponseWriter.WriteHeader(code)
}

func (j *jsonRefusals) Write(b []byte) (int, error) {
	if j.status == 0 {
		return j.ResponseWriter.Write(b)
	}
	if !j.done {
		j.done = true
		j.Header().Del("X-Content-Type-Options")
		api.WriteError(j.ResponseWriter, j.r, api.Errorf(j.status, refusalCode(j.status), "%s", strings.TrimSpace(string(b))))
	}
	return len(b), nil
}

// finish answers a refusal that set a status but wrote no message.
func (j *jsonRefusals) finish() {
	if j.status != 0 && !j.done {
		j.Write([]byte(http.StatusText(j.status)))
	}
}

// Buffers of a viewer's socket. A viewer sends a vote now and then and
// gets a frame a tick: net/http's 4 KB buffers each way were a third of
// what a viewer cost (bench/relay.sh, memory per viewer). A frame up to
// wsWriteBuffer goes out in one write, as before; the websocket library
// reads a larger message past the buffer.
const (
	wsReadBuffer  = 256
	wsWriteBuffer = 1024
)

func (j *jsonRefusals) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(j.ResponseWriter).Hijack()
	if err != nil {
		return c, brw, err
	}
	if j.wrap != nil {
		c = j.wrap(c) // the websocket library reads through it from now on
	}
	if err := brw.Writer.Flush(); err != nil { // net/http hands over an empty one; to be sure
		c.Close()
		return nil, nil, err
	}
	if n := brw.Reader.Buffered(); n > 0 { // what the client sent after its handshake, read already
		b, _ := brw.Reader.Peek(n)
		c = &prefixConn{Conn: c, prefix: bytes.Clone(b)}
	}
	return c, bufio.NewReadWriter(bufio.NewReaderSize(c, wsReadBuffer), bufio.NewWriterSize(c, wsWriteBuffer)), nil
}

// prefixConn reads prefix before the connection.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// budgetConn counts the raw bytes a client sends, frame headers included,
// against a rate: frames that carry nothing (empty continuation frames,
// pings) cost bytes on the wire although no message grows. Past the
// budget, over is called once; reads go on until the close completes.
type budgetConn struct {
	net.Conn
	lim  *rate.Limiter
	once sync.Once
	over func()
}

func (b *budgetConn) Read(p []byte) (int, error) {
	n, err := b.Conn.Read(p)
	if n > 0 && !b.lim.AllowN(time.Now(), n) {
		b.once.Do(b.over)
	}
	return n, err
}

func (j *jsonRefusals) Flush() { http.NewResponseController(j.ResponseWriter).Flush() }

func (j *jsonRefusals) Unwrap() http.ResponseWriter { return j.ResponseWriter }

func refusalCode(status int) string {
	switch status {
	case http.StatusUpgradeRequired:
		return api.CodeUpgradeRequired
	case http.StatusForbidden, http.StatusUnauthorized:
		return api.CodeUnauthorized
	}
	return api.CodeInvalidRequest
}
