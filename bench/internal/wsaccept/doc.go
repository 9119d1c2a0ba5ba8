// Package wsaccept is the bare benchmark servers' WebSocket handshake
// (RFC 6455 §4.2), by hand: bench/barefanout's and bench/usual's floors
// hold plain net.Conns, with no WebSocket library between them and the
// kernel. No extension and no subprotocol is ever agreed: a client
// offering permessage-deflate gets plain frames (§9.1).
package wsaccept
