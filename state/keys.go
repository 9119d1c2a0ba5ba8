package state

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
)

// keyPrefix names the persisted public keys of replicas.
const keyPrefix = "pubkey/"

// LearnKey records the Ed25519 public key a replica announced (in its
// authenticated member metadata), so its certificates can be verified
// even after it left. A replica's key never changes: a different key for a
// replica already known is refused (and the first one kept).
func (d *Definitions) LearnKey(replica string, pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("state: public key of %s has %d bytes", replica, len(pub))
	}
	d.mu.Lock()
	held, ok := d.keys[replica]
	d.mu.Unlock()
	if ok {
		if !bytes.Equal(held, pub) {
			return fmt.Errorf("state: replica %s announced another public key than the one it is known by", replica)
		}
		return nil
	}
	if d.store != nil {
		if err := d.store.PutMeta(keyPrefix+replica, pub); err != nil {
			return fmt.Errorf("%w: %w", ErrStore, err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.keys == nil {
		d.keys = map[string]ed25519.PublicKey{}
	}
	d.keys[replica] = bytes.Clone(pub)
	return nil
}

// PublicKey returns the key a replica is known by.
func (d *Definitions) PublicKey(replica string) (ed25519.PublicKey, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	k, ok := d.keys[replica]
	return k, ok
}

// loadKeys reads the persisted public keys; called by New.
func (d *Definitions) loadKeys() {
	for name, value := range d.store.MetaWithPrefix(keyPrefix) {
		if len(value) != ed25519.PublicKeySize {
			continue
		}
		if d.keys == nil {
			d.keys = map[string]ed25519.PublicKey{}
		}
		d.keys[name[len(keyPrefix):]] = bytes.Clone(value)
	}
}

// Keys returns every replica's public key this node knows.
func (d *Definitions) Keys() map[string]ed25519.PublicKey {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make(map[string]ed25519.PublicKey, len(d.keys))
	for r, k := range d.keys {
		out[r] = bytes.Clone(k)
	}
	return out
}
