package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"tally/api"
	"tally/bench/internal/wsaccept"
)

// sockets is the bare socket reader: GET /v1/polls/{poll}/live answered
// by a hand-written RFC 6455 server, one goroutine per socket (the HTTP
// server's, kept after the hijack), each message read, decoded, handed to
// the store and acknowledged, nothing else: no snapshot, no frames of the
// poll, no rate limit, no metrics. tally load --socket needs no first
// frame: it sends at once and counts the answers whose ref it awaits.
type sockets struct {
	store    string
	vote     func(ctx context.Context, poll, option, ip string) error
	seq      *atomic.Uint64 // vote ids, shared with the HTTP endpoint
	maxFrame int            // the largest message, in bytes
	max      int64          // the most sockets open at once
	open     atomic.Int64
}

// WebSocket opcodes and close codes (RFC 6455 §5.2, §7.4.1).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xa

	closeProtocolError   = 1002
	closeUnsupportedData = 1003
	closePolicyViolation = 1008
	closeTooBig          = 1009
)

// maxHeader is the longest frame header a server writes: 2 bytes and an
// 8-byte length (no mask).
const maxHeader = 10

// serve answers the handshake by hand, hijacks the connection and reads
// the socket until it closes, on the handler's goroutine.
func (s *sockets) serve(w http.ResponseWriter, r *http.Request) {
	key, ok := wsaccept.Check(w, r)
	if !ok {
		return
	}
	if s.open.Add(1) > s.max {
		s.open.Add(-1)
		http.Error(w, "too many sockets", http.StatusServiceUnavailable)
		return
	}
	defer s.open.Add(-1)
	conn, br, err := wsaccept.Accept(w, key)
	if err != nil {
		return
	}
	defer conn.Close()
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	c := &sock{s: s, conn: conn, br: br, ip: ip, poll: r.PathValue("poll"), ctx: r.Context(),
		out: make([]byte, maxHeader, 512)}
	if err := c.run(); err != nil && !errors.Is(err, errClosed) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
		log.Printf("socket %s: %v", r.RemoteAddr, err)
	}
}

// sock is one socket's state: everything it reads and writes goes
// through its two buffers, which grow to the largest message and are
// reused.
type sock struct {
	s    *sockets
	conn net.Conn
	br   *bufio.Reader // the HTTP server's reader of the connection (4 KiB)
	ip   string
	poll string
	ctx  context.Context
	hdr  [8]byte
	msg  []byte // the message being read, unmasked in place
	out  []byte // the frame being written: maxHeader bytes kept free, then the payload
}

// message is what a client sends (api.SocketMessage), decoded in one
// pass, its body (the body of POST …/votes: one vote or a batch) with it.
// Strict like the node's decoder: an unknown member is refused.
type message struct {
	Type  string `json:"type"`
	Ref   string `json:"ref"`
	Poll  string `json:"poll"`
	Voter string `json:"voter"`
	Name  string `json:"name"`
	Token string `json:"token"`
	Body  struct {
		Option string     `json:"option"`
		Voter  string     `json:"voter"`
		Idem   string     `json:"idem"`
		Name   string     `json:"name"`
		After  string     `json:"after"`
		Votes  []api.Vote `json:"votes"`
	} `json:"body"`
}

// errClosed ends run after a close frame, answered.
var errClosed = errors.New("closed by the client")

// run reads frames until the socket closes: a text message (in one frame
// or several) is answered by handle, a ping by a pong, a close by a
// close.
func (c *sock) run() error {
	c.msg = c.msg[:0]
	inMessage := false
	for {
		fin, op, payload, err := c.frame()
		if err != nil {
			var pe protocolError
			if errors.As(err, &pe) {
				c.close(pe.code, pe.reason)
			}
			return err
		}
		switch op {
		case opPing:
			if err := c.write(opPong, append(c.out[:maxHeader], payload...)); err != nil {
				return err
			}
			continue
		case opPong:
			continue
		case opClose:
			code := 1000
			if len(payload) >= 2 {
				code = int(binary.BigEndian.Uint16(payload))
			}
			c.close(code, "")
			return errClosed
		case opText:
			if inMessage {
				c.close(closeProtocolError, "a new message inside a fragmented one")
				return errors.New("protocol: text frame inside a message")
			}
			inMessage = true
		case opBinary:
			c.close(closeUnsupportedData, "messages must be JSON text")
			return errors.New("binary message")
		case opContinuation:
			if !inMessage {
				c.close(closeProtocolError, "continuation without a message")
				return errors.New("protocol: continuation without a message")
			}
		default:
			c.close(closeProtocolError, "unknown opcode")
			return errors.New("protocol: unknown opcode " + strconv.Itoa(int(op)))
		}
		if !fin {
			continue
		}
		inMessage = false
		if err := c.handle(c.msg); err != nil {
			return err
		}
		c.msg = c.msg[:0]
	}
}

// protocolError is a frame the server refuses, with the close code it
// answers.
type protocolError struct {
	code   int
	reason string
}

func (e protocolError) Error() string { return "protocol: " + e.reason }

// frame reads one frame. A data frame's payload is appended to c.msg,
// unmasked in place, and returned as the part appended; a control
// frame's payload is read after c.msg's end (c.msg keeps what it held)
// and returned.
func (c *sock) frame() (fin bool, op byte, payload []byte, err error) {
	h := c.hdr[:]
	if _, err = io.ReadFull(c.br, h[:2]); err != nil {
		return
	}
	fin, op = h[0]&0x80 != 0, h[0]&0x0f
	if h[0]&0x70 != 0 {
		return fin, op, nil, protocolError{closeProtocolError, "no extension was agreed"}
	}
	if h[1]&0x80 == 0 {
		return fin, op, nil, protocolError{closeProtocolError, "client frames must be masked"}
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		if _, err = io.ReadFull(c.br, h[:2]); err != nil {
			return
		}
		n = uint64(binary.BigEndian.Uint16(h))
	case 127:
		if _, err = io.ReadFull(c.br, h[:8]); err != nil {
			return
		}
		n = binary.BigEndian.Uint64(h)
	}
	control := op&0x8 != 0
	if control && (!fin || n > 125) {
		return fin, op, nil, protocolError{closeProtocolError, "a control frame must be whole and at most 125 bytes"}
	}
	if !control && n > uint64(c.s.maxFrame-len(c.msg)) {
		return fin, op, nil, protocolError{closeTooBig, "message too large"}
	}
	if _, err = io.ReadFull(c.br, h[:4]); err != nil {
		return
	}
	mask := binary.LittleEndian.Uint32(h)
	start := len(c.msg)
	end := start + int(n)
	c.msg = slices.Grow(c.msg, int(n)) // its length stays
	payload = c.msg[start:end]
	if _, err = io.ReadFull(c.br, payload); err != nil {
		return
	}
	unmask(payload, mask)
	if !control {
		c.msg = c.msg[:end]
	}
	return fin, op, payload, nil
}

// unmask XORs b with the frame's masking key, eight bytes at a time.
func unmask(b []byte, key uint32) {
	k8 := uint64(key) | uint64(key)<<32
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], binary.LittleEndian.Uint64(b[i:])^k8)
	}
	for ; i < len(b); i++ {
		b[i] ^= byte(key >> (8 * (i & 3)))
	}
}

// handle decodes one message, as the node's decoder does (api.Unmarshal,
// then api.CheckVotes on the votes), hands each vote to the store and
// writes the ack: the JSON of an api.SocketReply whose Result is an
// api.VoteResponse, appended by hand into the socket's reused buffer
// (what json.Marshal would write, without its allocations). A message
// that is not JSON, or of a type other than vote or resync, closes the
// socket with 1008, as the node does; a vote refused gets an error reply.
func (c *sock) handle(data []byte) error {
	var m message
	if err := api.Unmarshal(data, &m); err != nil {
		c.close(closePolicyViolation, "messages must be JSON objects of a known type")
		return err
	}
	switch m.Type {
	case "vote":
	case "resync":
		return nil // no stream here to send again
	default:
		c.close(closePolicyViolation, "unknown message type")
		return errors.New("unknown message type " + strconv.Quote(m.Type))
	}
	b := &m.Body
	votes := b.Votes
	if votes == nil {
		votes = []api.Vote{{Option: b.Option, Voter: b.Voter, Idem: b.Idem, Name: b.Name, After: b.After}}
	} else if b.Option != "" || b.Voter != "" || b.Idem != "" || b.Name != "" || b.After != "" {
		return c.refuse(m.Ref, api.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "send one vote or a \"votes\" batch, not both"))
	}
	if err := api.CheckVotes(votes); err != nil {
		return c.refuse(m.Ref, err)
	}
	for _, v := range votes {
		if err := c.s.vote(c.ctx, c.poll, v.Option, c.ip); err != nil {
			return c.refuse(m.Ref, err)
		}
	}
	now := time.Now().UnixMilli()
	o := append(c.out[:maxHeader], `{"type":"ack","ref":`...)
	o, _ = jsontext.AppendQuote(o, m.Ref)
	o = append(o, `,"result":{"results":[`...)
	for i, v := range votes {
		if i > 0 {
			o = append(o, ',')
		}
		o = append(o, `{"idem":`...)
		o, _ = jsontext.AppendQuote(o, v.Idem)
		o = append(o, `,"status":"accepted","vote_id":"`...)
		o = append(o, c.s.store...)
		o = append(o, '/')
		o = strconv.AppendUint(o, c.s.seq.Add(1), 10)
		// The stamp the node would answer (wall ms.logical): tally load
		// sends it back as the voter's next "after", as it does to a node.
		o = append(o, `","stamp":"`...)
		o = strconv.AppendInt(o, now, 10)
		o = append(o, `.0"}`...)
	}
	o = append(o, `],"server_time":`...)
	o = strconv.AppendInt(o, now, 10)
	o = append(o, "}}"...)
	return c.write(opText, o)
}

// refuse answers a message with an error reply (api.SocketReply's
// TypeError shape).
func (c *sock) refuse(ref string, err error) error {
	e := &api.Error{}
	if !errors.As(err, &e) {
		e = api.Errorf(http.StatusInternalServerError, api.CodeInternal, "internal error")
	}
	o := append(c.out[:maxHeader], `{"type":"error","ref":`...)
	o, _ = jsontext.AppendQuote(o, ref)
	o = append(o, `,"error":{"code":`...)
	o, _ = jsontext.AppendQuote(o, e.Code)
	o = append(o, `,"message":`...)
	o, _ = jsontext.AppendQuote(o, e.Message)
	o = append(o, "}}"...)
	return c.write(opText, o)
}

// write sends one unmasked frame whose payload is o[maxHeader:]: its
// header is put just before the payload, and the frame goes in one write.
func (c *sock) write(op byte, o []byte) error {
	c.out = o[:0] // keep the grown buffer
	n := len(o) - maxHeader
	start := maxHeader - 2
	switch {
	case n <= 125:
		o[start+1] = byte(n)
	case n <= 0xffff:
		start -= 2
		o[start+1] = 126
		binary.BigEndian.PutUint16(o[start+2:], uint16(n))
	default:
		start -= 8
		o[start+1] = 127
		binary.BigEndian.PutUint64(o[start+2:], uint64(n))
	}
	o[start] = 0x80 | op
	_, err := c.conn.Write(o[start:])
	return err
}

// close sends a close frame with code and reason (best effort: the
// socket is closed after it either way).
func (c *sock) close(code int, reason string) {
	o := binary.BigEndian.AppendUint16(c.out[:maxHeader], uint16(code))
	o = append(o, reason[:min(len(reason), 123)]...)
	c.write(opClose, o)
}
