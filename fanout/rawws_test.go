package fanout

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// rawSocket opens a WebSocket by hand, so a test can send frames no
// well-behaved client library would.
func rawSocket(t *testing.T, srv *httptest.Server, poll string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(conn, "GET /v1/polls/"+poll+"/live HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", res, err)
	}
	return conn, br
}

// emptyFrame is a masked client frame with an empty payload.
func emptyFrame(fin bool, opcode byte) []byte {
	b := opcode
	if fin {
		b |= 0x80
	}
	return []byte{b, 0x80, 1, 2, 3, 4} // mask bit set, length 0, a mask key
}

// closeCode reads server frames until a close frame and returns its code.
func closeCode(t *testing.T, br *bufio.Reader) websocket.StatusCode {
	t.Helper()
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			t.Fatalf("no close frame before the connection ended: %v", err)
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var l [2]byte
			io.ReadFull(br, l[:])
			n = uint64(binary.BigEndian.Uint16(l[:]))
		case 127:
			var l [8]byte
			io.ReadFull(br, l[:])
			n = binary.BigEndian.Uint64(l[:])
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(br, payload); err != nil {
			t.Fatal(err)
		}
		if h[0]&0x0f == 0x8 {
			if len(payload) < 2 {
				return websocket.StatusNoStatusRcvd
			}
			return websocket.StatusCode(binary.BigEndian.Uint16(payload))
		}
	}
}

// Floods of control frames and of empty continuation frames carry no
// message the read loop could count; they are counted all the same and
// close the socket with 1008 (policy violation).
func TestWebSocketFrameFloodsClose1008(t *testing.T) {
	st := newState(t)
	_, srv := serve(t, st, nil)
	floods := map[string]func() []byte{
		"pings": func() []byte {
			var b []byte
			for range 20_000 {
				b = append(b, emptyFrame(true, 0x9)...)
			}
			return b
		},
		"pongs": func() []byte {
			var b []byte
			for range 20_000 {
				b = append(b, emptyFrame(true, 0xA)...)
			}
			return b
		},
		"empty continuations": func() []byte {
			b := emptyFrame(false, 0x1) // a text message that never ends
			for range 100_000 {
				b = append(b, emptyFrame(false, 0x0)...)
			}
			return b
		},
	}
	for name, flood := range floods {
		t.Run(name, func(t *testing.T) {
			conn, br := rawSocket(t, srv, "p")
			go conn.Write(flood()) // the server may stop reading once it closes
			if code := closeCode(t, br); code != websocket.StatusPolicyViolation {
				t.Fatalf("closed with %v, want 1008", code)
			}
		})
	}
	// A client within its limits is not affected: it reads its snapshot.
	c := dial(t, srv, "p")
	if m := readMsg(t, c); m.Type != TypeSnapshot {
		t.Fatalf("after the floods: %+v", m)
	}
}

// A request for the live stream that is not a WebSocket upgrade gets 426
// in the API's JSON error shape, like every other error.
func TestLiveWithoutUpgradeIsJSON(t *testing.T) {
	st := newState(t)
	_, srv := serve(t, st, nil)
	res, err := http.Get(srv.URL + "/v1/polls/p/live")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Error struct{ Code, Message string }
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusUpgradeRequired ||
		body.Error.Code != "upgrade_required" || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("live without upgrade: %d %s %+v %v", res.StatusCode, res.Header.Get("Content-Type"), body, err)
	}
	// A foreign origin's refusal too.
	req, _ := http.NewRequest("GET", srv.URL+"/v1/polls/p/live", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Origin", "https://evil.example")
	res2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res2.Body.Close()
	if err := json.NewDecoder(res2.Body).Decode(&body); err != nil || res2.StatusCode != http.StatusForbidden || body.Error.Code != "cross_site" {
		t.Fatalf("foreign origin: %d %+v %v", res2.StatusCode, body, err)
	}
}

// A client that sends its first message in the same packet as its
// handshake has it read: what the HTTP server read past the handshake is
// handed to the socket (the hijacked connection gets smaller buffers).
func TestMessageSentWithTheHandshakeIsRead(t *testing.T) {
	st := newState(t)
	_, srv := serve(t, st, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	msg := `{"type":"no such type"}`
	frame := append([]byte{0x81, 0x80 | byte(len(msg)), 0, 0, 0, 0}, msg...) // masked with a zero key
	io.WriteString(conn, "GET /v1/polls/p/live HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"+string(frame))
	br := bufio.NewReader(conn)
	if res, err := http.ReadResponse(br, nil); err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", res, err)
	}
	if code := closeCode(t, br); code != websocket.StatusPolicyViolation {
		t.Fatalf("closed with %v, want 1008 for the message sent with the handshake", code)
	}
}
