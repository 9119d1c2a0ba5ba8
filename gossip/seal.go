package gossip

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
)

// ErrUnauthenticated is returned for a gossip message whose seal does not
// verify with any key of the keyring: it is dropped and counted, never
// decoded.
var ErrUnauthenticated = errors.New("gossip: message not authenticated by the cluster key")

// A sealed message is sealMagic, a 32-byte HMAC-SHA256 tag, then the
// encoded message. The MAC key is derived from each gossip key (HMAC of a
// fixed label), so the same secret never serves two purposes. The first
// key seals; every key of the ring verifies, so the three-step key
// rotation of docs/operations.md works for this path as for memberlist's.
const (
	sealMagic = "TS1"
	sealTag   = sha256.Size
)

// keyring seals and opens gossip payloads. Without keys it passes messages
// through unchanged: a node without a key is a single node.
type keyring struct {
	macKeys [][]byte
	relay   [][]byte // the relay's MAC keys (SealRelay): another purpose, another key
}

func newKeyring(keys [][]byte) keyring {
	var k keyring
	for _, key := range keys {
		k.macKeys = append(k.macKeys, derive(key, "tally gossip payload mac v1"))
		k.relay = append(k.relay, derive(key, "tally relay mac v1"))
	}
	return k
}

// forRelay is the keyring that seals the edges' relay messages.
func (k keyring) forRelay() keyring { return keyring{macKeys: k.relay} }

// derive makes a purpose-bound secret from a cluster key.
func derive(key []byte, label string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

func (k keyring) enabled() bool { return len(k.macKeys) > 0 }

// seal prefixes b with the primary key's tag.
func (k keyring) seal(b []byte) []byte {
	if !k.enabled() {
		return b
	}
	out := make([]byte, 0, len(sealMagic)+sealTag+len(b))
	out = append(out, sealMagic...)
	out = append(out, mac(k.macKeys[0], b)...)
	return append(out, b...)
}

// open checks the tag against every key and returns the message.
func (k keyring) open(b []byte) ([]byte, error) {
	if !k.enabled() {
		return b, nil
	}
	if len(b) < len(sealMagic)+sealTag || string(b[:len(sealMagic)]) != sealMagic {
		return nil, ErrUnauthenticated
	}
	tag, body := b[len(sealMagic):len(sealMagic)+sealTag], b[len(sealMagic)+sealTag:]
	for _, key := range k.macKeys {
		if hmac.Equal(tag, mac(key, body)) {
			return body, nil
		}
	}
	return nil, ErrUnauthenticated
}

func mac(key, b []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(sealMagic))
	m.Write(b)
	return m.Sum(nil)
}

// SealRelay seals a relay message (package relay) with the cluster's
// keyring, under the relay's own derived key: only members make one a
// full node believes.
func (g *Gossip) SealRelay(b []byte) []byte { return g.keys.forRelay().seal(b) }

// OpenRelay checks a relay message's seal and returns the message.
func (g *Gossip) OpenRelay(b []byte) ([]byte, error) { return g.keys.forRelay().open(b) }

// RelaySealer seals and opens relay messages under keys as a node of the
// cluster does (the first key seals): for tools that stand in for edges
// (bench/relayload).
func RelaySealer(keys [][]byte) (seal func([]byte) []byte, open func([]byte) ([]byte, error)) {
	k := newKeyring(keys).forRelay()
	return k.seal, k.open
}
