package fanout

import (
	"bufio"
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

func (j *jsonRefusals) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(j.ResponseWriter).Hijack()
	if err == nil && j.wrap != nil {
		c = j.wrap(c) // the websocket library reads through it from now on
	}
	return c, brw, err
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
