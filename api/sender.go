package api

import "time"

// Sender is what a transport knows of the client a vote came from: the
// HTTP handler and the live socket fill it in, the vote path reads it for
// the voter token, the trust score and a quiz answer's time.
type Sender struct {
	IP        string // the client's address (after the trusted proxies)
	UserAgent string // a voter token is bound to it
	Token     string // the voter token the request or message carried; "" if none
	// SocketAge is how long the WebSocket the vote came on has been open
	// (a trust signal); < 0: not a socket.
	SocketAge time.Duration
	// ShownMs is when this node first put the question on the client's
	// socket (Unix ms, this node's clock; 0: not over a socket, or not
	// yet): a quiz answer's time starts there (docs/quiz.md).
	ShownMs int64
	// RTTMs is the socket's last measured round trip; -1: not measured.
	RTTMs int64
	// ReceivedMs is when the transport read the request or message (Unix
	// ms, this node's clock; 0: not known, then the time it is stamped):
	// where a quiz answer's time ends, so the node's own queues under
	// load cost the participant nothing.
	ReceivedMs int64
}

// HTTPSender is the Sender of a plain HTTP request from ip: no socket,
// no round trip measured.
func HTTPSender(ip, userAgent, token string, receivedMs int64) Sender {
	return Sender{IP: ip, UserAgent: userAgent, Token: token, SocketAge: -1, RTTMs: -1, ReceivedMs: receivedMs}
}
