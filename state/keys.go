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
func (s *State) LearnKey(replica string, pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("state: public key of %s has %d bytes", replica, len(pub))
	}
	s.mu.Lock()
	held, ok := s.keys[replica]
	s.mu.Unlock()
	if ok {
		if !bytes.Equal(held, pub) {
			return fmt.Errorf("state: replica %s announced another public key than the one it is known by", replica)
		}
		return nil
	}
	if s.store != nil {
		if err := s.store.PutMeta(keyPrefix+replica, pub); err != nil {
			return fmt.Errorf("%w: %w", ErrStore, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys = map[string]ed25519.PublicKey{}
	}
	s.keys[replica] = bytes.Clone(pub)
	return nil
}

// PublicKey returns the key a replica is known by.
func (s *State) PublicKey(replica string) (ed25519.PublicKey, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.keys[replica]
	return k, ok
}

// loadKeys reads the persisted public keys; called by New.
func (s *State) loadKeys() {
	for name, value := range s.store.MetaWithPrefix(keyPrefix) {
		if len(value) != ed25519.PublicKeySize {
			continue
		}
		if s.keys == nil {
			s.keys = map[string]ed25519.PublicKey{}
		}
		s.keys[name[len(keyPrefix):]] = bytes.Clone(value)
	}
}
