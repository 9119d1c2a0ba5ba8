package wsaccept

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// acceptGUID is the handshake's constant (RFC 6455 §1.3).
const acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// Check reports whether r is a version-13 WebSocket handshake, and its
// key; when it is not, it has answered (426 or 400).
func Check(w http.ResponseWriter, r *http.Request) (key string, ok bool) {
	if r.Header.Get("Sec-WebSocket-Version") != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		http.Error(w, "WebSocket version 13 is required", http.StatusUpgradeRequired)
		return "", false
	}
	key = r.Header.Get("Sec-WebSocket-Key")
	if k, err := base64.StdEncoding.DecodeString(key); err != nil || len(k) != 16 ||
		!headerHas(r.Header, "Connection", "upgrade") || !headerHas(r.Header, "Upgrade", "websocket") {
		http.Error(w, "a WebSocket handshake is required", http.StatusBadRequest)
		return "", false
	}
	return key, true
}

// Accept hijacks the connection, clears the HTTP server's deadline and
// answers 101 for key. The reader holds what the client sent past its
// request; the caller closes the connection.
func Accept(w http.ResponseWriter, key string) (net.Conn, *bufio.Reader, error) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "cannot hijack", http.StatusInternalServerError)
		return nil, nil, fmt.Errorf("wsaccept: %w", err)
	}
	conn.SetDeadline(time.Time{}) // the HTTP server's, if any, would cut the stream
	h := sha1.Sum([]byte(key + acceptGUID))
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "+
		base64.StdEncoding.EncodeToString(h[:])+"\r\n\r\n"); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("wsaccept: %w", err)
	}
	return conn, brw.Reader, nil
}

// headerHas reports whether a comma-separated header holds token, in any
// case.
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
